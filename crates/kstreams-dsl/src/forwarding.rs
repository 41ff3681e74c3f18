//! The typed edges between node instances: what a node knows about
//! itself, and the children it forwards its output to.

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use kstreams_record::Record;

use crate::task_context::TaskContext;
use crate::StreamsError;

/// What one node instance knows about itself.
#[derive(Debug)]
pub(crate) struct NodeInfo {
    pub(crate) name: Rc<str>,
    pub(crate) index: usize,
    pub(crate) stores: Vec<String>,
}

/// The typed entry of a node: its parents call `push`.
pub(crate) trait Input<K, V> {
    fn push(&self, record: Record<K, V>, task: &mut TaskContext) -> Result<(), StreamsError>;
}

struct Child<K, V> {
    name: Rc<str>,
    input: Rc<dyn Input<K, V>>,
}

/// A record the processor forwarded: to every child (`child` is `None`,
/// [`crate::ProcessorContext::forward`]) or to one by name
/// ([`crate::ProcessorContext::forward_to`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedForward<K, V> {
    /// The child it was sent to, if one was named.
    pub child: Option<String>,
    /// The record as forwarded.
    pub record: Record<K, V>,
}

/// The forwards captured so far, shared with the capturing child.
pub(crate) type Captured<K, V> = Rc<RefCell<Vec<CapturedForward<K, V>>>>;

/// The children of a node, all taking the node's output type.
pub(crate) struct Outputs<K, V> {
    children: Vec<Child<K, V>>,
    /// A mock context's: a record sent to a child by name is captured under
    /// that name (the mock's one child captures the rest).
    capture: Option<Captured<K, V>>,
}

/// The one child of a mock context: keeps what it is sent.
struct Capture<K, V>(Captured<K, V>);

impl<K, V> Input<K, V> for Capture<K, V> {
    fn push(&self, record: Record<K, V>, _: &mut TaskContext) -> Result<(), StreamsError> {
        self.0.borrow_mut().push(CapturedForward {
            child: None,
            record,
        });
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static> Outputs<K, V> {
    /// Collects the typed inputs of the children built before this node.
    pub(crate) fn from_children(children: &[(Rc<str>, &dyn Any)]) -> Result<Self, StreamsError> {
        let children = children
            .iter()
            .map(|(name, any)| {
                let input = any.downcast_ref::<Rc<dyn Input<K, V>>>().ok_or_else(|| {
                    StreamsError::Internal(format!(
                        "child {name:?} does not take {}",
                        std::any::type_name::<(K, V)>()
                    ))
                })?;
                Ok(Child {
                    name: name.clone(),
                    input: input.clone(),
                })
            })
            .collect::<Result<_, StreamsError>>()?;
        Ok(Self {
            children,
            capture: None,
        })
    }

    /// A mock context's outputs: everything forwarded lands in `captured`.
    pub(crate) fn capturing(captured: Captured<K, V>) -> Self {
        let input: Rc<dyn Input<K, V>> = Rc::new(Capture(captured.clone()));
        Self {
            children: vec![Child {
                name: Rc::from(""),
                input,
            }],
            capture: Some(captured),
        }
    }

    pub(crate) fn forward(
        &self,
        record: Record<K, V>,
        task: &mut TaskContext,
    ) -> Result<(), StreamsError> {
        let Some((last, rest)) = self.children.split_last() else {
            return Ok(());
        };
        for child in rest {
            child.input.push(record.clone(), task)?;
        }
        last.input.push(record, task)
    }

    pub(crate) fn forward_to(
        &self,
        name: &str,
        record: Record<K, V>,
        task: &mut TaskContext,
        from: &str,
    ) -> Result<(), StreamsError> {
        if let Some(captured) = &self.capture {
            captured.borrow_mut().push(CapturedForward {
                child: Some(name.to_string()),
                record,
            });
            return Ok(());
        }
        match self.children.iter().find(|c| &*c.name == name) {
            Some(child) => child.input.push(record, task),
            None => Err(StreamsError::UnknownChild {
                node: from.to_string(),
                child: name.to_string(),
                children: self.children.iter().map(|c| c.name.to_string()).collect(),
            }),
        }
    }
}
