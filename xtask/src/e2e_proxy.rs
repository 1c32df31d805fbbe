//! The proxy part of `cargo xtask e2e`: `cuca proxy` in record mode in front of the real
//! llama-server, then in replay mode with no upstream, driven over raw HTTP/1.1 so nothing
//! but the proxy and the server is involved.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

/// Stops the proxy when the check ends, whichever way it ends.
struct Proxy {
    child: Child,
    address: String,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One answer: status line, headers (lowercased names), body with chunked encoding undone.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn start(root: &Path, args: &[&str]) -> anyhow::Result<Proxy> {
    let mut child = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args([
            "run",
            "-q",
            "-p",
            "cuca-cli",
            "--",
            "proxy",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .env_remove("CUCA_CALL_LOG_BODIES")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting cuca proxy")?;
    let stdout = child.stdout.take().context("the proxy's stdout")?;
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .context("reading the proxy's first line")?;
    let Some(address) = first.trim().strip_prefix("listening on http://") else {
        let _ = child.kill();
        bail!("cuca proxy printed {first:?} first, not its address");
    };
    Ok(Proxy {
        address: address.to_owned(),
        child,
    })
}

fn post(address: &str, path: &str, body: &str) -> anyhow::Result<Answer> {
    let mut stream =
        TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAuthorization: Bearer e2e-secret\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).context("reading the answer")?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("an answer with no header end")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .context("an answer with no status")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}

fn dechunk(mut body: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("a chunk with no size line")?;
        let size = usize::from_str_radix(std::str::from_utf8(&body[..end])?.trim(), 16)?;
        body = &body[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(body.get(..size).context("a chunk cut short")?);
        body = body.get(size + 2..).unwrap_or_default();
    }
}

/// The text a streamed answer carried: every `delta.content` and `delta.reasoning_content`,
/// in order, and whether it ended with `[DONE]`.
fn streamed_text(body: &[u8]) -> anyhow::Result<(String, bool)> {
    let mut text = String::new();
    let mut done = false;
    for line in String::from_utf8_lossy(body).lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let chunk: serde_json::Value = serde_json::from_str(data)
            .with_context(|| format!("an event that is not JSON: {data}"))?;
        for key in ["reasoning_content", "content"] {
            if let Some(piece) = chunk["choices"][0]["delta"][key].as_str() {
                text.push_str(piece);
            }
        }
    }
    Ok((text, done))
}

/// Records one streamed call through the proxy, replays it with the upstream out of the
/// picture, and checks that a changed prompt is a 409. Returns a one-line summary.
pub(crate) fn run(root: &Path, base_url: &str, dir: &Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir)?;
    let dir_arg = dir.to_str().context("a work directory that is not UTF-8")?;
    let request = r#"{"model":"cuca-tiny-random","messages":[{"role":"user","content":"The vault is in Lisbon. Reply with: noted"}],"max_tokens":16,"stream":true}"#;
    let changed = r#"{"model":"cuca-tiny-random","messages":[{"role":"user","content":"Where is the vault?"}],"max_tokens":16,"stream":true}"#;
    let path = "/s/e2e/v1/chat/completions";

    let recorded = {
        let proxy = start(
            root,
            &["--upstream", base_url, "--dir", dir_arg, "--mode", "record"],
        )?;
        println!(
            "e2e: cuca proxy (record) at {} in front of {base_url}",
            proxy.address
        );
        let answer = post(&proxy.address, path, request)?;
        if answer.status != 200 {
            bail!(
                "record mode answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        if answer.header("x-cuca-session") != Some("e2e") {
            bail!(
                "record mode's answer names session {:?}",
                answer.header("x-cuca-session")
            );
        }
        let (text, done) = streamed_text(&answer.body)?;
        if !done || text.is_empty() {
            bail!("record mode's stream carried {text:?} (ended with [DONE]: {done})");
        }
        text
    };
    let on_disk = std::fs::read(dir.join("e2e.cslog")).context("the recorded session file")?;
    if on_disk.windows(10).any(|w| w == b"e2e-secret") {
        bail!("the caller's Authorization reached the session file");
    }

    let proxy = start(root, &["--dir", dir_arg, "--mode", "replay"])?;
    println!("e2e: cuca proxy (replay, no upstream) at {}", proxy.address);
    let answer = post(&proxy.address, path, request)?;
    if answer.status != 200 {
        bail!(
            "replay mode answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
    }
    let (replayed, done) = streamed_text(&answer.body)?;
    if !done || replayed != recorded {
        bail!("replay mode streamed {replayed:?}, the recording holds {recorded:?}");
    }
    let diverged = post(&proxy.address, path, changed)?;
    if diverged.status != 409 {
        bail!(
            "a changed prompt answered {}, not 409: {}",
            diverged.status,
            String::from_utf8_lossy(&diverged.body)
        );
    }
    Ok(format!(
        "recorded and replayed {} characters of streamed text; a changed prompt is a 409",
        recorded.chars().count()
    ))
}
