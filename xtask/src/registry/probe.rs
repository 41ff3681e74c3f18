//! Just enough HTTP/1.1 to see the registry answer, so xtask needs no HTTP
//! client dependency.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The status code of `GET <url>/subjects` (`url` is `http://host:port/path`).
pub(super) fn get_status(url: &str, timeout: Duration) -> io::Result<u16> {
    let invalid =
        |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {url}"));
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid("not an http:// URL"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let address = authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| invalid("no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path}/subjects HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    )?;
    let mut status_line = String::new();
    BufReader::new(stream).read_line(&mut status_line)?;
    parse_status(&status_line).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not HTTP: {status_line:?}"),
        )
    })
}

fn parse_status(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    parts
        .next()
        .filter(|version| version.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status("HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(parse_status("HTTP/1.0 404 Not Found"), Some(404));
        assert_eq!(parse_status("SSH-2.0-OpenSSH"), None);
        assert_eq!(parse_status(""), None);
    }

    #[test]
    fn asks_for_the_subjects_under_the_path() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            // Read the headers too: closing with unread bytes makes the
            // kernel reset the connection, and the client may see the reset
            // before the answer.
            let mut header = String::new();
            while reader.read_line(&mut header).unwrap() > 0 && header != "\r\n" {
                header.clear();
            }
            (&stream)
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]")
                .unwrap();
            request_line
        });
        let status = get_status(
            &format!("http://127.0.0.1:{port}/apis/ccompat/v7"),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            server.join().unwrap(),
            "GET /apis/ccompat/v7/subjects HTTP/1.1\r\n"
        );
        assert!(get_status("https://x", Duration::from_secs(1)).is_err());
    }
}
