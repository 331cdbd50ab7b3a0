//! A kept-alive connection's next request must arrive in time.
//!
//! actix-web 4 times the head of a connection's first request only
//! (`client_request_timeout`), and it stops the keep-alive timer at the
//! first byte of the next: a client that sent a later head a byte now and
//! then held its connection for as long as it liked, no credentials needed.
//! So every connection gets a watch. Once an answer is out and no request
//! is in flight, the next request's head must be in within [`NEXT_HEAD`]
//! (the keep-alive time, then the head timeout), or the watch shuts the
//! socket. A request in flight, however long its answer streams, is never
//! cut by it; its body has its own pace (`http::body`).

use std::any::Any;
use std::cell::Cell;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::rt::net::TcpStream;
use actix_web::web::Bytes;
use tokio::sync::Notify;

/// How long an idle connection stays open (actix's `keep_alive`).
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// How long a request head may take (actix's `client_request_timeout`).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// After an answer, the time the next request's head has to arrive whole.
pub const NEXT_HEAD: Duration = KEEP_ALIVE.saturating_add(HEAD_TIMEOUT);

/// `HttpServer::on_connect`: starts the connection's watch. A connection
/// that is not plain TCP goes unwatched (actix's own timers still apply).
pub fn on_connect(connection: &dyn Any, data: &mut Extensions) {
    let Some(tcp) = connection.downcast_ref::<TcpStream>() else {
        return;
    };
    // A second handle on the socket, so the watch can shut it while actix
    // owns the stream.
    let Ok(socket) = tcp.as_fd().try_clone_to_owned() else {
        // Out of descriptors, most likely: shut rather than serve a
        // connection nothing would time, which is what an attacker
        // holding many connections open would arrange.
        tracing::warn!(
            "a connection was shut: its socket could not be shared (out of file descriptors?)"
        );
        let _ = socket2::SockRef::from(tcp).shutdown(std::net::Shutdown::Both);
        return;
    };
    let watch = Rc::new(Watch {
        socket: std::net::TcpStream::from(socket),
        in_flight: Cell::new(0),
        idle_since: Cell::new(Instant::now()),
        wake: Notify::new(),
        closed: Cell::new(false),
    });
    actix_web::rt::spawn(watch.clone().run());
    data.insert(ConnectionWatch(watch));
}

/// The watch, as the connection's data holds it: when actix drops the
/// connection, the watch ends.
struct ConnectionWatch(Rc<Watch>);

impl Drop for ConnectionWatch {
    fn drop(&mut self) {
        self.0.closed.set(true);
        self.0.wake.notify_one();
    }
}

struct Watch {
    socket: std::net::TcpStream,
    in_flight: Cell<u32>,
    /// When the last answer was out (or the connection opened), while
    /// nothing is in flight.
    idle_since: Cell<Instant>,
    /// Woken when the connection goes idle or closes; a deadline that moves
    /// later or goes away needs no wake (the watch looks again when due).
    wake: Notify,
    closed: Cell<bool>,
}

impl Watch {
    /// When the connection is cut if nothing changes; `None` while a request
    /// is in flight.
    fn due(&self) -> Option<Instant> {
        (self.in_flight.get() == 0).then(|| self.idle_since.get() + NEXT_HEAD)
    }

    async fn run(self: Rc<Self>) {
        while !self.closed.get() {
            let Some(due) = self.due() else {
                self.wake.notified().await;
                continue;
            };
            tokio::select! {
                () = tokio::time::sleep_until(due.into()) => {}
                () = self.wake.notified() => continue,
            }
            if !self.closed.get() && self.due().is_some_and(|due| due <= Instant::now()) {
                // actix reads the end of the stream and drops the connection.
                let _ = self.socket.shutdown(std::net::Shutdown::Both);
                metrics::counter!("leadpipe_http_connections_cut_total", "reason" => "next_head_late")
                    .increment(1);
                return;
            }
        }
    }

    fn started(self: &Rc<Self>) -> InFlight {
        self.in_flight.set(self.in_flight.get() + 1);
        InFlight(self.clone())
    }
}

/// A request in flight: dropped when its answer is out, or abandoned.
struct InFlight(Rc<Watch>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let watch = &self.0;
        watch.in_flight.set(watch.in_flight.get().saturating_sub(1));
        if watch.in_flight.get() == 0 {
            watch.idle_since.set(Instant::now());
            watch.wake.notify_one();
        }
    }
}

/// The outermost middleware: a request is in flight from its head until
/// its answer's last byte is handed to actix.
pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<WatchedBody<impl MessageBody>>, actix_web::Error> {
    let in_flight = req
        .conn_data::<ConnectionWatch>()
        .map(|watch| watch.0.started());
    let response = next.call(req).await?;
    Ok(response.map_body(|_, answer| WatchedBody { answer, in_flight }))
}

/// An answer that ends its request's time in flight when it is sent whole
/// (or dropped unsent).
pub struct WatchedBody<B> {
    answer: B,
    in_flight: Option<InFlight>,
}

impl<B: MessageBody + Unpin> MessageBody for WatchedBody<B> {
    type Error = B::Error;

    fn size(&self) -> BodySize {
        self.answer.size()
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let next = Pin::new(&mut self.answer).poll_next(cx);
        if let Poll::Ready(None) = next {
            self.in_flight = None;
        }
        next
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn watch() -> Rc<Watch> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        Rc::new(Watch {
            socket,
            in_flight: Cell::new(0),
            idle_since: Cell::new(Instant::now()),
            wake: Notify::new(),
            closed: Cell::new(false),
        })
    }

    #[test]
    fn nothing_is_due_while_a_request_is_in_flight() {
        let watch = watch();
        let first = watch.started();
        let pipelined = watch.started();
        assert_eq!(watch.due(), None);
        drop(first);
        assert_eq!(watch.due(), None, "one request is still in flight");
        let before = Instant::now();
        drop(pipelined);
        let due = watch.due().unwrap();
        assert!(due >= before + NEXT_HEAD && due <= Instant::now() + NEXT_HEAD);
    }
}
