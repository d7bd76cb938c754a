//! A network partition between one process and a server: a TCP relay the process
//! connects through, which can be cut. A cut relay forwards nothing more in either
//! direction and closes nothing: the connections stay open and silent, as when a
//! network drops packets, so neither side learns of it from the socket.

use std::net::SocketAddr;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A relay from a local port to `upstream`; stops when dropped.
pub struct Partition {
    addr: SocketAddr,
    cut: CancellationToken,
    stop: CancellationToken,
}

impl Partition {
    /// Starts relaying connections made to [`Partition::addr`] to `upstream`.
    pub async fn relay(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("failed to bind the relay")?;
        let addr = listener.local_addr()?;
        let (cut, stop) = (CancellationToken::new(), CancellationToken::new());
        tokio::spawn(accept(listener, upstream, cut.clone(), stop.clone()));
        Ok(Self { addr, cut, stop })
    }

    /// Where the process connects instead of `upstream`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on nothing crosses, and new connections are accepted but never joined.
    pub fn cut(&self) {
        self.cut.cancel();
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    cut: CancellationToken,
    stop: CancellationToken,
) {
    loop {
        let inbound = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(_) => continue,
            },
        };
        let (cut, stop) = (cut.clone(), stop.clone());
        tokio::spawn(async move {
            if cut.is_cancelled() {
                // Held open, unanswered, until the relay stops.
                stop.cancelled().await;
                drop(inbound);
                return;
            }
            let Ok(outbound) = TcpStream::connect(upstream).await else {
                return;
            };
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = async {
                    let halves = tokio::join!(
                        pipe(in_read, out_write, &cut),
                        pipe(out_read, in_write, &cut),
                    );
                    // Cut: the halves are kept, open and silent, until the relay stops.
                    stop.cancelled().await;
                    drop(halves);
                } => {}
            }
        });
    }
}

/// Copies `from` to `to` until either closes or the relay is cut; returns the halves
/// so that a cut keeps them open.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: &CancellationToken,
) -> (
    tokio::net::tcp::OwnedReadHalf,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            _ = cut.cancelled() => break,
            n = from.read(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
        };
        // Bytes read before the cut but written after it would cross it.
        if cut.is_cancelled() || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    (from, to)
}
