//! `--metrics ADDR`: the [`Metrics`] page over plain HTTP, for Prometheus
//! to scrape. It answers `GET /metrics` (and `/`) and nothing else; a
//! request head has a few seconds and a few KiB, and at most
//! [`MAX_SCRAPES`] connections are served at once (the oldest dropped past
//! that), so the page cannot be turned into a load on the server, and
//! idle sockets held on the port do not delay a scraper that asks at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::metrics::Metrics;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Time a scraper has to send its request and take the page.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections answered at once.
const MAX_SCRAPES: usize = 16;

/// Serves the page on `listener` until the process ends.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    let mut scrapes = ddnet::greeting::Greeters::new(MAX_SCRAPES);
    loop {
        tokio::select! {
            r = listener.accept() => {
                let sock = match r {
                    Ok((sock, _)) => sock,
                    Err(e) => {
                        tokio::time::sleep(ddnet::greeting::after_failed_accept(&e).unwrap_or(Duration::from_millis(100))).await;
                        continue;
                    }
                };
                let metrics = metrics.clone();
                scrapes.spawn(async move {
                    let _ = tokio::time::timeout(SCRAPE_TIMEOUT, answer(sock, &metrics)).await;
                });
            }
            _ = scrapes.reaped() => {}
        }
    }
}

async fn answer(mut sock: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = sock.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let (status, body) = match asks_for_page(&head) {
        true => ("200 OK", metrics.render() + &crate::process_metrics::render()),
        false => ("404 Not Found", "GET /metrics\n".to_string()),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(reply.as_bytes()).await?;
    sock.shutdown().await
}

/// Whether a request head (anything a client sent) asks for the page.
pub fn asks_for_page(head: &[u8]) -> bool {
    route(head).is_some()
}

fn route(head: &[u8]) -> Option<()> {
    let line = head.split(|&b| b == b'\r').next()?;
    let mut words = line.split(|&b| b == b' ');
    let (method, target) = (words.next()?, words.next()?);
    let path = target.split(|&b| b == b'?').next()?;
    (method == b"GET" && (path == b"/metrics" || path == b"/")).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_get_metrics_is_answered() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Some(()));
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Some(()));
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n"), None);
        assert_eq!(route(b"GET /etc/passwd HTTP/1.1\r\n\r\n"), None);
        assert_eq!(route(b""), None);
    }

    proptest! {
        #[test]
        fn any_head_is_routed_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = asks_for_page(&b);
        }
    }
}
