//! A small HTTP server for Prometheus scrapes: `GET /metrics`.
//!
//! One thread, blocking sockets, one connection at a time: a scrape every
//! few seconds needs no more, and the record path never waits on it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{Error, MetricsRegistry};

/// How long a client may take to send its request or read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Requests larger than this are refused (a scrape sends a few hundred bytes).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// Serves a [`MetricsRegistry`] at `http://<address>/metrics` in the
/// Prometheus text format, from a thread of its own, until
/// [`MetricsExporter::stop`] (or drop).
///
/// ```
/// use kstreams_metrics::{MetricsExporter, MetricsRegistry};
///
/// let registry = MetricsRegistry::new();
/// let exporter = MetricsExporter::start(registry, "127.0.0.1:0").unwrap();
/// println!("scrape http://{}/metrics", exporter.local_addr());
/// exporter.stop();
/// ```
#[derive(Debug)]
pub struct MetricsExporter {
    address: SocketAddr,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsExporter {
    /// Listens on `address` (port 0 picks a free port, see
    /// [`MetricsExporter::local_addr`]) and starts serving.
    pub fn start(registry: MetricsRegistry, address: impl ToSocketAddrs) -> Result<Self, Error> {
        let listener = TcpListener::bind(&address).map_err(|source| Error::Io {
            action: "listening on",
            address: address
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .map_or_else(|| "the given address".to_string(), |a| a.to_string()),
            source,
        })?;
        let address = listener.local_addr().map_err(|source| Error::Io {
            action: "reading the address of",
            address: "the metrics listener".to_string(),
            source,
        })?;
        let stopping = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("kstreams-metrics-exporter".to_string())
            .spawn({
                let stopping = stopping.clone();
                move || serve(listener, registry, stopping)
            })
            .map_err(|source| Error::Io {
                action: "starting the exporter thread for",
                address: address.to_string(),
                source,
            })?;
        Ok(Self {
            address,
            stopping,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Stops listening and waits for the thread to end.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stopping.store(true, Ordering::SeqCst);
        // The thread sits in accept(): a connection of our own wakes it.
        let mut wake = self.address;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        match TcpStream::connect_timeout(&wake, Duration::from_secs(1)) {
            Ok(_) => {
                let _ = thread.join();
            }
            // Unreachable from here: the thread ends at the next
            // connection; do not hang the caller waiting for it.
            Err(e) => log::warn!(
                "metrics exporter on {}: could not wake it: {e}",
                self.address
            ),
        }
    }
}

impl Drop for MetricsExporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn serve(listener: TcpListener, registry: MetricsRegistry, stopping: Arc<AtomicBool>) {
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => {
                if let Err(e) = answer(stream, &registry) {
                    log::debug!("metrics exporter: {e}");
                }
            }
            Err(e) => {
                log::warn!("metrics exporter: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Reads the request head (up to the blank line) and answers it.
fn answer(mut stream: TcpStream, registry: &MetricsRegistry) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut request = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        if request.len() > MAX_REQUEST_BYTES {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "",
                b"",
                false,
            );
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&request);
    let mut first = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = registry.gather_text();
            respond(
                &mut stream,
                "200 OK",
                prometheus::TEXT_FORMAT,
                body.as_bytes(),
                head_only,
            )
        }
        ("GET" | "HEAD", _) => respond(
            &mut stream,
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"metrics are at /metrics\n",
            head_only,
        ),
        _ => respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            b"only GET and HEAD\n",
            false,
        ),
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    if status.starts_with("405") {
        head.push_str("Allow: GET, HEAD\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names;

    fn get(address: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    #[test]
    fn serves_metrics_over_http() {
        let registry = MetricsRegistry::new();
        let exporter = MetricsExporter::start(registry.clone(), "127.0.0.1:0").unwrap();
        let address = exporter.local_addr();
        assert_ne!(address.port(), 0);
        // Recorded after start: each scrape reads the live values.
        registry
            .counter(&names::TASK_DROPPED_RECORDS_TOTAL, &["t1", "0_3"])
            .unwrap()
            .add(7);

        let response = get(
            address,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
        );
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(
            head.contains("Content-Type: text/plain; version=0.0.4"),
            "{head}"
        );
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
        assert!(
            body.contains(r#"kstreams_task_dropped_records_total{task_id="0_3",thread_id="t1"} 7"#),
            "{body}"
        );

        let missing = get(address, "GET / HTTP/1.1\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(
            address,
            "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        );
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let head = get(address, "HEAD /metrics?x=1 HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "no body for HEAD: {head}");

        exporter.stop();
        assert!(
            TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_err(),
            "still listening after stop"
        );
    }

    #[test]
    fn a_taken_port_is_an_error() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap();
        let err = MetricsExporter::start(MetricsRegistry::new(), address).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(err.to_string().contains(&address.to_string()), "{err}");
    }
}
