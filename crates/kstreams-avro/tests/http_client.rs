//! The HTTP client against a loopback stub that answers with the JSON of
//! the Confluent REST API: the requests it sends (paths, bodies, headers),
//! what it caches, failover between URLs, and the errors of bad answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstreams_avro::{
    Error, HttpSchemaRegistryClient, RegistryConfig, SchemaId, SchemaRegistryClient, Version,
};

#[derive(Clone, Debug)]
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Answer = fn(&Request) -> (u16, String);

struct Stub {
    url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Stub {
    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// A registry stand-in on a free loopback port; each connection is served
/// on its own thread until the client closes it (keep-alive included).
fn stub(answer: Answer) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || serve(stream, answer, &seen));
        }
    });
    Stub { url, requests }
}

fn serve(stream: TcpStream, answer: Answer, seen: &Mutex<Vec<Request>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap().to_owned(),
            parts.next().unwrap().to_owned(),
        );
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let request = Request {
            method,
            path,
            headers,
            body: String::from_utf8(body).unwrap(),
        };
        let (status, body) = answer(&request);
        seen.lock().unwrap().push(request);
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

const SCHEMA: &str =
    r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;

fn registry_answers(request: &Request) -> (u16, String) {
    let schema = serde_json::to_string(SCHEMA).unwrap();
    match (request.method.as_str(), request.path.as_str()) {
        ("POST", "/ccompat/subjects/users-value/versions") => (200, r#"{"id":7}"#.into()),
        ("POST", "/ccompat/subjects/users-value") => (
            200,
            format!(r#"{{"subject":"users-value","id":7,"version":3,"schema":{schema}}}"#),
        ),
        ("GET", "/ccompat/schemas/ids/7") => (200, format!(r#"{{"schema":{schema}}}"#)),
        (
            "GET",
            "/ccompat/subjects/a%2Fb/versions/latest" | "/ccompat/subjects/a%2Fb/versions/3",
        ) => (
            200,
            format!(r#"{{"subject":"a/b","id":7,"version":3,"schema":{schema}}}"#),
        ),
        ("GET", "/ccompat/schemas/ids/8") => (
            404,
            r#"{"error_code":40403,"message":"Schema 8 not found"}"#.into(),
        ),
        ("GET", "/ccompat/schemas/ids/9") => (200, "<html>proxy login</html>".into()),
        _ => (
            500,
            r#"{"error_code":50001,"message":"unexpected request"}"#.into(),
        ),
    }
}

fn client(stub: &Stub) -> HttpSchemaRegistryClient {
    HttpSchemaRegistryClient::from_properties([
        (
            "schema.registry.url",
            format!("{}/ccompat/", stub.url).as_str(),
        ),
        ("basic.auth.credentials.source", "USER_INFO"),
        ("basic.auth.user.info", "fred:letmein"),
    ])
    .unwrap()
}

#[test]
fn register_posts_the_schema_with_auth_and_is_cached() {
    let stub = stub(registry_answers);
    let client = client(&stub);
    assert_eq!(client.register("users-value", SCHEMA).unwrap(), SchemaId(7));
    assert_eq!(client.register("users-value", SCHEMA).unwrap(), SchemaId(7));
    // The id's schema came with the registration: no GET.
    assert_eq!(client.schema_by_id(SchemaId(7)).unwrap(), SCHEMA);
    let requests = stub.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let post = &requests[0];
    assert_eq!(post.method, "POST");
    assert_eq!(
        post.header("content-type"),
        Some("application/vnd.schemaregistry.v1+json")
    );
    // base64("fred:letmein")
    assert_eq!(post.header("authorization"), Some("Basic ZnJlZDpsZXRtZWlu"));
    let body: serde_json::Value = serde_json::from_str(&post.body).unwrap();
    assert_eq!(body, serde_json::json!({ "schema": SCHEMA }));
}

#[test]
fn lookups_by_id_and_numbered_version_are_cached_latest_is_not() {
    let stub = stub(registry_answers);
    let client = client(&stub);
    for _ in 0..2 {
        assert_eq!(client.schema_by_id(SchemaId(7)).unwrap(), SCHEMA);
        let found = client.lookup("users-value", SCHEMA).unwrap();
        assert_eq!((found.id, found.version), (SchemaId(7), 3));
        let latest = client.schema_by_version("a/b", Version::Latest).unwrap();
        assert_eq!((latest.subject.as_str(), latest.version), ("a/b", 3));
    }
    // Latest named version 3, which is now cached.
    client.schema_by_version("a/b", Version::Number(3)).unwrap();
    let paths: Vec<String> = stub.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/ccompat/schemas/ids/7",
            "/ccompat/subjects/users-value",
            "/ccompat/subjects/a%2Fb/versions/latest",
            "/ccompat/subjects/a%2Fb/versions/latest",
        ]
    );
}

#[test]
fn error_answers_become_errors() {
    let stub = stub(registry_answers);
    let client = client(&stub);
    let missing = client.schema_by_id(SchemaId(8)).unwrap_err();
    assert!(
        matches!(
            missing,
            Error::NotFound {
                error_code: Some(40403),
                ..
            }
        ),
        "{missing}"
    );
    assert!(
        missing.to_string().contains("schema id 8 not found"),
        "{missing}"
    );
    let html = client.schema_by_id(SchemaId(9)).unwrap_err();
    assert!(matches!(html, Error::BadResponse { .. }), "{html}");
    let refused = client.register("other", SCHEMA).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("answered 500 (error code 50001)"),
        "{refused}"
    );
}

#[test]
fn the_next_url_is_tried_when_one_is_unreachable() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let stub = stub(registry_answers);
    let mut config = RegistryConfig::new(&format!("{closed}/ccompat,{}/ccompat", stub.url));
    config.connect_timeout = Duration::from_secs(2);
    let client = HttpSchemaRegistryClient::new(config).unwrap();
    assert_eq!(client.schema_by_id(SchemaId(7)).unwrap(), SCHEMA);

    let mut config = RegistryConfig::new(&closed);
    config.connect_timeout = Duration::from_secs(2);
    let alone = HttpSchemaRegistryClient::new(config).unwrap();
    let error = alone.schema_by_id(SchemaId(7)).unwrap_err();
    assert!(matches!(error, Error::Unreachable { .. }), "{error}");
}
