//! `--scrape-ms`: a kstreams run watched as production watches it. The
//! application serves its HTTP endpoints (kstreams-http) and a thread
//! fetches `/metrics` every interval, as a Prometheus scrape would, so the
//! run's figures include rendering the registry and the server's thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kstreams::http::HttpServer;
use kstreams::prelude::KafkaStreams;

use crate::Error;

/// The server and the scraping thread; dropping it stops both and says
/// how many scrapes there were.
pub struct Scraper {
    server: Option<HttpServer>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Scrapes, String>>>,
}

/// What the scraping thread saw.
struct Scrapes {
    count: u64,
    bytes: u64,
    slowest: Duration,
}

impl Scraper {
    pub fn start(app: &KafkaStreams, every: Duration) -> Result<Scraper, Error> {
        let server = HttpServer::start(app, "127.0.0.1:0")?;
        let url = format!("{}/metrics", server.url());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-scraper".into())
            .spawn(move || scrape_until(&url, every, &stopping))?;
        Ok(Scraper {
            server: Some(server),
            stop,
            thread: Some(thread),
        })
    }
}

fn scrape_until(url: &str, every: Duration, stop: &AtomicBool) -> Result<Scrapes, String> {
    let agent = ureq::Agent::new_with_defaults();
    let mut seen = Scrapes {
        count: 0,
        bytes: 0,
        slowest: Duration::ZERO,
    };
    let mut next = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let started = Instant::now();
        if started >= next {
            let body = agent
                .get(url)
                .call()
                .and_then(|mut r| r.body_mut().read_to_string())
                .map_err(|e| format!("GET {url}: {e}"))?;
            seen.count += 1;
            seen.bytes += body.len() as u64;
            seen.slowest = seen.slowest.max(started.elapsed());
            next = started + every;
        }
        std::thread::sleep(Duration::from_millis(10).min(every));
    }
    Ok(seen)
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            match thread.join() {
                Ok(Ok(s)) => eprintln!(
                    "scraped /metrics {} times, {} bytes on average, slowest {:.1} ms",
                    s.count,
                    s.bytes / s.count.max(1),
                    s.slowest.as_secs_f64() * 1e3
                ),
                Ok(Err(e)) => eprintln!("scraping stopped: {e}"),
                Err(_) => eprintln!("the scraping thread panicked"),
            }
        }
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}
