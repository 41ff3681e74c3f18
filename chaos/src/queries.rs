//! Interactive-query metadata asked of the running instances: what an
//! instance answers for each key (`query_metadata_for_key`, and the key's
//! count in its own store where it says it is the active host), the file
//! format that carries the answers from the app to the scenario, and the
//! checks of one round of answers from every instance.

use std::collections::{BTreeMap, BTreeSet};

/// The store the count topology queries: [`crate::app`]'s `counts`.
pub(crate) const STORE: &str = "counts";

/// The line an instance reads on its stdin to answer: `query`, the file of
/// keys (one a line) and the file to write the answers to, tab-separated.
pub(crate) const COMMAND: &str = "query";

/// What the instance's own store holds for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Local {
    /// The instance is not the key's active host: not read.
    NotActiveHere,
    /// The count of the key in the active task's store here.
    Count(i64),
    /// The store here has no count for the key.
    Missing,
    /// The store here could not be read.
    Error(String),
}

/// One instance's answer for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyAnswer {
    pub partition: i32,
    /// `host:port` of the active task's instance.
    pub active: String,
    /// `host:port` of the instances with a standby, sorted.
    pub standbys: Vec<String>,
    pub local: Local,
}

/// An answer, or the query error's text.
pub(crate) type Answer = Result<KeyAnswer, String>;

/// No tab or line break inside a field.
fn field(text: &str) -> String {
    text.replace(['\t', '\n', '\r'], " ")
}

/// The line of `key`'s answer.
pub(crate) fn format_line(key: &str, answer: &Answer) -> String {
    match answer {
        Ok(a) => {
            let local = match &a.local {
                Local::NotActiveHere => "-".to_string(),
                Local::Count(n) => n.to_string(),
                Local::Missing => "none".to_string(),
                Local::Error(e) => format!("error:{}", field(e)),
            };
            format!(
                "{key}\tok\t{}\t{}\t{}\t{local}\n",
                a.partition,
                field(&a.active),
                field(&a.standbys.join(","))
            )
        }
        Err(error) => format!("{key}\terror\t{}\n", field(error)),
    }
}

/// Reads the lines [`format_line`] wrote, by key.
pub(crate) fn parse(text: &str) -> Result<BTreeMap<String, Answer>, String> {
    let mut answers = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let answer = match fields[..] {
            [_, "error", message] => Err(message.to_string()),
            [_, "ok", partition, active, standbys, local] => Ok(KeyAnswer {
                partition: partition
                    .parse()
                    .map_err(|_| format!("bad partition in {line:?}"))?,
                active: active.to_string(),
                standbys: standbys
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
                local: match local {
                    "-" => Local::NotActiveHere,
                    "none" => Local::Missing,
                    other => match other.strip_prefix("error:") {
                        Some(error) => Local::Error(error.to_string()),
                        None => Local::Count(
                            other
                                .parse()
                                .map_err(|_| format!("bad count in {line:?}"))?,
                        ),
                    },
                },
            }),
            _ => return Err(format!("not an answer line: {line:?}")),
        };
        answers.insert(fields[0].to_string(), answer);
    }
    Ok(answers)
}

/// What one round of answers from every live instance shows, in keys.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RoundReport {
    pub keys: u64,
    /// Keys some instance did not answer, or answered with an error.
    pub unanswered: u64,
    /// Keys the instances answered differently (partition, active or
    /// standby hosts).
    pub disagreeing: u64,
    /// Keys whose active host is not a live instance.
    pub dead_active: u64,
    /// Keys without a standby host.
    pub without_standby: u64,
    /// Keys whose active host's own store does not hold the count it
    /// should (the expected count, when given; else any count).
    pub wrong_local: u64,
    /// The first problem, for the log.
    pub first_problem: Option<String>,
}

impl RoundReport {
    /// Every key answered alike by every instance, with a live active host
    /// whose store holds the key's count.
    pub(crate) fn answered(&self) -> bool {
        self.unanswered == 0
            && self.disagreeing == 0
            && self.dead_active == 0
            && self.wrong_local == 0
    }

    fn problem(&mut self, what: impl FnOnce() -> String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(what());
        }
    }
}

/// Checks one round: `answers` by instance (`host:port`, every live one),
/// `expected` the final count of each key once the input is all processed
/// (`None` while it still flows: the active host must then hold some count).
pub(crate) fn check_round(
    keys: &[String],
    answers: &BTreeMap<String, BTreeMap<String, Answer>>,
    expected: Option<&BTreeMap<String, u64>>,
) -> RoundReport {
    let live: BTreeSet<&str> = answers.keys().map(String::as_str).collect();
    let mut report = RoundReport {
        keys: keys.len() as u64,
        ..RoundReport::default()
    };
    for key in keys {
        let mut agreed: Option<(&str, &KeyAnswer)> = None;
        let (mut unanswered, mut disagreeing) = (false, false);
        for (host, theirs) in answers {
            match theirs.get(key) {
                Some(Ok(answer)) => match agreed {
                    None => agreed = Some((host, answer)),
                    Some((first, a)) => {
                        let same = (a.partition, &a.active, &a.standbys)
                            == (answer.partition, &answer.active, &answer.standbys);
                        if !same && !disagreeing {
                            disagreeing = true;
                            report.problem(|| {
                                format!("{key}: {first} says {a:?}, {host} says {answer:?}")
                            });
                        }
                    }
                },
                other => {
                    unanswered = true;
                    report.problem(|| format!("{key}: {host} answered {other:?}"));
                }
            }
        }
        report.unanswered += u64::from(unanswered);
        report.disagreeing += u64::from(disagreeing);
        let Some((_, answer)) = agreed.filter(|_| !unanswered && !disagreeing) else {
            continue;
        };
        if !live.contains(answer.active.as_str()) {
            report.dead_active += 1;
            report.problem(|| format!("{key}: active host {} is not live", answer.active));
            continue;
        }
        report.without_standby += u64::from(answer.standbys.is_empty());
        let local = answers
            .get(&answer.active)
            .and_then(|theirs| theirs.get(key))
            .and_then(|a| a.as_ref().ok())
            .map(|a| &a.local);
        let right = match (local, expected.map(|e| e.get(key))) {
            (Some(Local::Count(n)), Some(Some(&want))) => *n == want as i64,
            (Some(Local::Count(_)), None) => true,
            _ => false,
        };
        if !right {
            report.wrong_local += 1;
            report.problem(|| {
                format!(
                    "{key}: its active host {} holds {local:?}, expected {:?}",
                    answer.active,
                    expected.and_then(|e| e.get(key))
                )
            });
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(partition: i32, active: &str, standbys: &[&str], local: Local) -> Answer {
        Ok(KeyAnswer {
            partition,
            active: active.to_string(),
            standbys: standbys.iter().map(|s| s.to_string()).collect(),
            local,
        })
    }

    #[test]
    fn lines_are_read_back() {
        let answers = [
            ("k1", answer(2, "a:1", &["b:2", "c:3"], Local::Count(7))),
            ("k2", answer(0, "b:2", &[], Local::NotActiveHere)),
            ("k3", answer(1, "a:1", &["b:2"], Local::Missing)),
            (
                "k4",
                answer(1, "a:1", &["b:2"], Local::Error("no\tstore".into())),
            ),
            ("k5", Err("rebalancing\nnow".to_string())),
        ];
        let text: String = answers.iter().map(|(k, a)| format_line(k, a)).collect();
        let read = parse(&text).unwrap();
        assert_eq!(read.len(), 5);
        assert_eq!(read["k1"], answers[0].1);
        assert_eq!(read["k2"], answers[1].1);
        assert_eq!(read["k3"], answers[2].1);
        assert_eq!(
            read["k4"],
            answer(1, "a:1", &["b:2"], Local::Error("no store".into()))
        );
        assert_eq!(read["k5"], Err("rebalancing now".to_string()));
        assert!(parse("k1\tok\tx\ta:1\t\t-\n").is_err());
    }

    fn round(
        a: &[(&str, Answer)],
        b: &[(&str, Answer)],
    ) -> BTreeMap<String, BTreeMap<String, Answer>> {
        let of = |pairs: &[(&str, Answer)]| -> BTreeMap<String, Answer> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        [("a:1".to_string(), of(a)), ("b:2".to_string(), of(b))].into()
    }

    #[test]
    fn a_round_passes_only_when_every_key_is_answered_alike_and_held() {
        let keys = vec!["k1".to_string(), "k2".to_string()];
        let expected: BTreeMap<String, u64> = [("k1".into(), 3), ("k2".into(), 5)].into();
        let good = round(
            &[
                ("k1", answer(0, "a:1", &["b:2"], Local::Count(3))),
                ("k2", answer(1, "b:2", &["a:1"], Local::NotActiveHere)),
            ],
            &[
                ("k1", answer(0, "a:1", &["b:2"], Local::NotActiveHere)),
                ("k2", answer(1, "b:2", &["a:1"], Local::Count(5))),
            ],
        );
        let report = check_round(&keys, &good, Some(&expected));
        assert!(report.answered(), "{report:?}");
        assert_eq!(report.without_standby, 0);

        let bad = round(
            &[
                ("k1", answer(0, "a:1", &[], Local::Count(2))),
                ("k2", answer(1, "c:3", &[], Local::NotActiveHere)),
            ],
            &[
                ("k1", answer(0, "a:1", &[], Local::NotActiveHere)),
                ("k2", Err("rebalancing".into())),
            ],
        );
        let report = check_round(&keys, &bad, Some(&expected));
        assert_eq!(
            (
                report.unanswered,
                report.wrong_local,
                report.without_standby
            ),
            (1, 1, 1)
        );
        assert!(!report.answered());

        let split = round(
            &[("k1", answer(0, "a:1", &[], Local::Count(3)))],
            &[("k1", answer(0, "b:2", &[], Local::NotActiveHere))],
        );
        let report = check_round(&keys[..1], &split, None);
        assert_eq!(report.disagreeing, 1);
        let dead = round(
            &[("k1", answer(0, "c:3", &[], Local::NotActiveHere))],
            &[("k1", answer(0, "c:3", &[], Local::NotActiveHere))],
        );
        assert_eq!(check_round(&keys[..1], &dead, None).dead_active, 1);
    }
}
