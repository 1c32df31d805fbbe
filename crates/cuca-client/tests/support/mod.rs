//! A loopback HTTP/1.1 server the tests start themselves: it answers each accepted
//! connection with the next scripted [`Reply`] and records every request.
//!
//! It is a server, not a mock of the client: the client under test dials a real socket,
//! and SSE bodies go out as real chunked transfer encoding, one HTTP chunk per piece, so
//! a test decides where the bytes split.
// Test support: each test binary uses a different part of it, and a failure to bind a
// loopback port should stop the test at once, so unwrap is the right reaction here.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The real llama-server transcripts, copied from the shared fixtures.
pub const STREAM_BASIC: &[u8] = include_bytes!("../fixtures/llama-server/stream-basic.body");
pub const STREAM_SECOND_TURN: &[u8] =
    include_bytes!("../fixtures/llama-server/stream-second-turn.body");
pub const STREAM_REASONING: &[u8] =
    include_bytes!("../fixtures/llama-server/stream-reasoning.body");
pub const STREAM_NO_USAGE: &[u8] = include_bytes!("../fixtures/llama-server/stream-no-usage.body");
pub const ERROR_NO_MESSAGES: &[u8] =
    include_bytes!("../fixtures/llama-server/error-no-messages.body");
pub const ERROR_CONTEXT_OVERFLOW: &[u8] =
    include_bytes!("../fixtures/llama-server/error-context-overflow.body");
pub const ERROR_BAD_JSON: &[u8] = include_bytes!("../fixtures/llama-server/error-bad-json.body");
/// Reconstructed from llama-server's sources, not captured (see the fixtures' README): it
/// quotes the conversation of the test's `request` back.
pub const ERROR_PARSE_MESSAGES: &[u8] =
    include_bytes!("../fixtures/llama-server/error-parse-messages.body");

/// What the server does with one connection.
pub enum Reply {
    /// `200 text/event-stream`, each piece one HTTP chunk, then the terminating chunk.
    Sse(Vec<Vec<u8>>),
    /// As [`Reply::Sse`], then the connection is closed without the terminating chunk.
    SseCut(Vec<Vec<u8>>),
    /// As [`Reply::Sse`], with a pause of the given length before each piece after the first.
    SsePaced(Vec<Vec<u8>>, std::time::Duration),
    /// As [`Reply::Sse`] without the terminating chunk, then the server waits until the
    /// client closes the connection and reports it on the channel.
    SseHold(Vec<Vec<u8>>, mpsc::UnboundedSender<&'static str>),
    /// No answer at all: the server reads the request, reports it on the channel, and waits
    /// until the client closes the connection.
    Hang(mpsc::UnboundedSender<&'static str>),
    /// A status line, extra headers and a `Content-Length` body.
    Status {
        status: u16,
        content_type: &'static str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    },
}

impl Reply {
    /// A transcript served whole.
    pub fn sse(body: &[u8]) -> Reply {
        Reply::Sse(vec![body.to_vec()])
    }

    /// A JSON error with `status`.
    pub fn json_error(status: u16, body: &[u8]) -> Reply {
        Reply::Status {
            status,
            content_type: "application/json; charset=utf-8",
            headers: Vec::new(),
            body: body.to_vec(),
        }
    }
}

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A running loopback server; it stops when dropped.
pub struct TestServer {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Starts a server on `127.0.0.1:0` that answers connections with `replies` in order.
    pub async fn start(replies: Vec<Reply>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let recorded = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let reply = replies.lock().unwrap().pop_front();
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    serve(socket, reply, recorded).await;
                });
            }
        });
        TestServer {
            base_url,
            requests,
            task,
        }
    }

    /// The requests read so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// A base URL where nothing listens: a port bound and released.
pub async fn refused_base_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

async fn serve(mut socket: TcpStream, reply: Option<Reply>, recorded: Arc<Mutex<Vec<Recorded>>>) {
    socket.set_nodelay(true).unwrap();
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    recorded.lock().unwrap().push(request);
    let reply = reply.unwrap_or_else(|| Reply::Status {
        status: 500,
        content_type: "text/plain",
        headers: Vec::new(),
        body: b"the test server has no more scripted replies".to_vec(),
    });
    let _ = write_reply(&mut socket, reply).await;
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

async fn write_chunks(socket: &mut TcpStream, pieces: &[Vec<u8>]) -> std::io::Result<()> {
    write_paced(socket, pieces, std::time::Duration::ZERO).await
}

/// The SSE head, then each piece as one HTTP chunk, `pause` before each after the first.
async fn write_paced(
    socket: &mut TcpStream,
    pieces: &[Vec<u8>],
    pause: std::time::Duration,
) -> std::io::Result<()> {
    socket.write_all(SSE_HEAD).await?;
    socket.flush().await?;
    for (i, piece) in pieces.iter().filter(|p| !p.is_empty()).enumerate() {
        if i > 0 && !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
        frame.extend_from_slice(piece);
        frame.extend_from_slice(b"\r\n");
        socket.write_all(&frame).await?;
        socket.flush().await?;
    }
    Ok(())
}

async fn write_reply(socket: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Sse(pieces) => {
            write_chunks(socket, &pieces).await?;
            socket.write_all(b"0\r\n\r\n").await?;
            socket.shutdown().await
        }
        Reply::SseCut(pieces) => {
            write_chunks(socket, &pieces).await?;
            socket.shutdown().await
        }
        Reply::SsePaced(pieces, pause) => {
            write_paced(socket, &pieces, pause).await?;
            socket.write_all(b"0\r\n\r\n").await?;
            socket.shutdown().await
        }
        Reply::SseHold(pieces, closed) => {
            write_chunks(socket, &pieces).await?;
            let mut sink = [0u8; 256];
            loop {
                match socket.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = closed.send("client closed the connection");
            Ok(())
        }
        Reply::Hang(read) => {
            let _ = read.send("request read");
            let mut sink = [0u8; 256];
            loop {
                match socket.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            Ok(())
        }
        Reply::Status {
            status,
            content_type,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Status\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(&body).await?;
            socket.shutdown().await
        }
    }
}

/// Splits `body` at the cut points (taken modulo its length), keeping every byte.
pub fn split_at(body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut start = 0;
    for cut in cuts {
        pieces.push(body[start..cut].to_vec());
        start = cut;
    }
    pieces.push(body[start..].to_vec());
    pieces
}
