//! One socket type for plaintext and TLS links, so that the code serving a connection (or a
//! replication link) is written once. The TLS variants are boxed: their state (buffers,
//! keys) is a few KiB, and the plaintext case should not carry it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// A plaintext TCP socket, or TLS over one (accepted or connected).
pub enum Stream {
    Plain(TcpStream),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket underneath (addresses, readiness, peeking for a close).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Server(s) => s.get_ref().0,
            Stream::Client(s) => s.get_ref().0,
        }
    }

    pub fn is_tls(&self) -> bool {
        !matches!(self, Stream::Plain(_))
    }

    /// The plaintext socket, or the stream back if it is encrypted (whose state cannot move
    /// to another thread's reactor as a bare descriptor).
    pub fn into_plain(self) -> Result<TcpStream, Stream> {
        match self {
            Stream::Plain(s) => Ok(s),
            other => Err(other),
        }
    }

    /// Writes all of `bytes` and, over TLS, flushes the records rustls still holds: a
    /// `write_all` alone may leave the tail of a reply encrypted in rustls's buffer when the
    /// socket would block.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all(bytes).await?;
        if self.is_tls() {
            self.flush().await?;
        }
        Ok(())
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Server(s) => Pin::new(&mut **s).poll_read(cx, buf),
            Stream::Client(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Server(s) => Pin::new(&mut **s).poll_write(cx, buf),
            Stream::Client(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Server(s) => Pin::new(&mut **s).poll_flush(cx),
            Stream::Client(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Server(s) => Pin::new(&mut **s).poll_shutdown(cx),
            Stream::Client(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}
