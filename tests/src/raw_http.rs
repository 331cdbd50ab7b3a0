//! HTTP/1.1 by hand over a raw TCP stream, for tests about connections:
//! whether an answer keeps or ends its connection, a body that trickles.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// An answer read off the wire.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// The server announced it closes the connection (`Connection: close`).
    pub closing: bool,
    pub body: String,
}

/// The next answer on `stream`: its status and whether the server announced
/// it closes, or `None` when the server had already closed the connection.
pub async fn read_answer(stream: &mut TcpStream) -> Option<(u16, bool)> {
    read_full_answer(stream)
        .await
        .map(|answer| (answer.status, answer.closing))
}

/// Whether the server ends the connection within 5 s: the next read finds
/// its end (nothing more was sent). A server that holds it is `false`, not
/// a hang.
pub async fn ended(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf));
    matches!(read.await, Ok(Ok(0) | Err(_)))
}

/// The next answer on `stream` with its body, `None` when the server had
/// already closed the connection.
pub async fn read_full_answer(stream: &mut TcpStream) -> Option<Answer> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        answer.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&answer[..head_end]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while answer.len() < head_end + length {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    Some(Answer {
        status,
        closing: head.contains("connection: close"),
        body: String::from_utf8_lossy(&answer[head_end..head_end + length]).into_owned(),
    })
}
