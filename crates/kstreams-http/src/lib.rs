//! The operator's HTTP endpoints of a kstreams application, on one small
//! server ([`HttpServer`], axum on a tokio runtime of its own thread):
//! Prometheus metrics, liveness and readiness probes, the topology as text,
//! DOT and SVG, and the instance's state as JSON.
//!
//! Nothing listens unless a program starts a server; the default address
//! ([`HttpServer::DEFAULT_ADDRESS`]) is on this host only.
//!
//! This crate owns:
//! - the server and its lifecycle ([`HttpServer`]);
//! - the endpoints and their answers;
//! - the topology as DOT ([`topology_dot`]) and as SVG ([`dot_to_svg`]);
//! - restore progress bars on a terminal ([`RestoreProgressBars`], a
//!   restore listener).

#![forbid(unsafe_code)]

mod client_metrics;
mod progress_bars;
mod routes;
mod server;
mod state_json;
mod topology_dot;
mod topology_svg;

pub use progress_bars::RestoreProgressBars;
pub use server::HttpServer;
pub use topology_dot::topology_dot;
pub use topology_svg::dot_to_svg;

/// Why the server could not start or the topology could not be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The address could not be listened on.
    #[error("http server: cannot listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The server's runtime or thread could not be made.
    #[error("http server: {action}: {source}")]
    Io {
        /// What it was doing.
        action: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The topology's DOT text could not be laid out.
    #[error("topology picture: {0}")]
    Layout(String),
}
