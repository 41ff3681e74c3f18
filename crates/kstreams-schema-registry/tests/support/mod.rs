//! What the real-registry tests of the Protobuf and JSON Schema serdes
//! share (each includes this file with `#[path]`): finding the registry and
//! the Python peer, or skipping with a line that says so, and running the
//! peer, xtask/registry/confluent_peer.py.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use kstreams_schema_registry::HttpSchemaRegistryClient;

/// The registry's Confluent-compatible base URL.
pub(crate) const REGISTRY_ENV: &str = "KSTREAMS_TEST_SCHEMA_REGISTRY";
/// A Python interpreter with Confluent's `confluent-kafka` serializers.
pub(crate) const PYTHON_PEER_ENV: &str = "KSTREAMS_TEST_CONFLUENT_PYTHON";

/// The variable's value, or `None` (with a line on stderr) to skip.
pub(crate) fn env_or_skip(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => Some(value.trim().to_owned()),
        _ => {
            let test = std::thread::current().name().unwrap_or("test").to_owned();
            // One write straight to the stream: the harness captures the
            // print macros of passing tests, and a skip should be seen.
            let line = format!(
                "skipped {test}: {name} not set (run `eval \"$(cargo xtask registry start)\"`)\n"
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

pub(crate) fn client(url: &str) -> Arc<HttpSchemaRegistryClient> {
    Arc::new(HttpSchemaRegistryClient::from_properties([("schema.registry.url", url)]).unwrap())
}

/// A name no earlier run used (a valid Protobuf package too).
pub(crate) fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}

/// Sets a subject's compatibility rule through the Confluent config API
/// (the serdes never change it; the tests want the registry to check).
pub(crate) fn set_compatibility(url: &str, subject: &str, level: &str) {
    let mut answer = ureq::put(&format!("{url}/config/{subject}"))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .send(format!(r#"{{"compatibility":"{level}"}}"#))
        .unwrap();
    let body = answer.body_mut().read_to_string().unwrap();
    assert!(body.contains(level), "{body}");
}

/// Runs the Python peer and returns what it printed.
pub(crate) fn python_peer(python: &str, args: &[&str]) -> String {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../xtask/registry/confluent_peer.py");
    let output = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "the Python peer failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}
