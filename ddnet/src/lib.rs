//! DDNet: one message channel striped over several TCP links (NICs), the
//! senders of each pair of links working from opposite ends of a message so
//! a slower or loaded link still contributes, with no monitoring.
//!
//! Use [`Striped`] where a program would use one `TcpStream` to exchange
//! messages: [`Striped::connect`] with one `(local address, remote address)`
//! pair per link, [`StripeListener::accept`] on the other side, then
//! [`Striped::send`] / [`Striped::recv`] in both directions and
//! [`Striped::close`] when done. [`StripedWriter`] and [`StripedReader`]
//! turn a channel into a byte stream (AsyncWrite / AsyncRead). Over TLS:
//! [`Striped::connect_with`] and [`StripeListener::with_tls`] ([`tls`]
//! makes the configurations).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use ddnet::{StripeListener, Striped};
//! // Receiver: listen on both NICs' addresses.
//! let l = StripeListener::bind(&["10.0.1.2:7500".parse().unwrap(), "10.0.2.2:7500".parse().unwrap()]).await?;
//! // Sender: one link per (local, remote) pair.
//! let tx = Striped::connect(&[
//!     (Some("10.0.1.1".parse().unwrap()), "10.0.1.2:7500".parse().unwrap()),
//!     (Some("10.0.2.1".parse().unwrap()), "10.0.2.2:7500".parse().unwrap()),
//! ])
//! .await?;
//! let rx = l.accept().await?;
//! tx.send(bytes::Bytes::from(vec![7u8; 64 << 20])).await?;
//! tx.close().await?;
//! assert_eq!(rx.recv().await?.unwrap().len(), 64 << 20);
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`plan`]: the sans-IO claim state (pairs, partitions by rate, helping,
//!   failed links' runs sent again).
//! - [`wire`]: the frames one link carries.
//! - [`endpoint`]: links, writers, readers, reassembly, acks.
//! - [`stream`]: the byte-stream adapters.
//! - [`sys`]: the socket calls tokio does not wrap (ddftpd and ddftp use them too).
//! - [`tls`]: TLS configs and a plain-or-TLS stream (ddftpd and ddftp use them too).

mod der;
pub mod endpoint;
pub mod greeting;
pub mod pinned;
pub mod plan;
pub mod ratelimit;
pub mod stream;
pub mod sys;
pub mod tls;
pub mod wake;
pub mod wire;

pub use endpoint::{Message, Relink, Stats, StripeListener, Striped};
pub use stream::{StripedReader, StripedWriter};
