//! The language server's stdio transport: `Content-Length` framed JSON-RPC
//! with bounds. A message that is not JSON, not a JSON-RPC message, has a
//! malformed header, or is larger than [`MAX_MESSAGE`] is answered with a
//! JSON-RPC error and the server goes on; nothing a client sends can make
//! it allocate more than the limit or exit.

use std::io::{self, BufRead, Read, Write};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};
use lsp_server::{Connection, Message};

/// The largest message read (a document's text travels inside one, JSON
/// escaped).
pub const MAX_MESSAGE: usize = 128 << 20;

/// The longest header line read; LSP has two short headers.
const MAX_HEADER_LINE: u64 = 8 << 10;

/// JSON-RPC error codes.
const PARSE_ERROR: i32 = -32700;
const INVALID_REQUEST: i32 = -32600;

/// The reader and writer threads of [`stdio`].
pub struct IoThreads {
    reader: JoinHandle<()>,
    writer: JoinHandle<io::Result<()>>,
}

impl IoThreads {
    /// Waits for both threads (the writer ends when every sender is dropped).
    pub fn join(self) -> io::Result<()> {
        let _ = self.reader.join();
        match self.writer.join() {
            Ok(r) => r,
            Err(_) => Err(io::Error::other("the LSP writer thread panicked")),
        }
    }
}

/// A connection over stdin and stdout.
pub fn stdio() -> io::Result<(Connection, IoThreads)> {
    let (to_client, outgoing) = bounded::<Message>(0);
    let (incoming, from_client) = bounded::<Message>(16);
    let writer = std::thread::Builder::new().name("memlint-lsp-writer".into()).spawn(move || write_loop(&outgoing))?;
    let reader = std::thread::Builder::new().name("memlint-lsp-reader".into()).spawn(move || {
        let stdin = io::stdin();
        read_loop(&mut stdin.lock(), &incoming, &mut |raw| {
            let mut out = io::stdout().lock();
            let _ = out.write_all(&raw).and_then(|_| out.flush());
        });
    })?;
    Ok((Connection { sender: to_client, receiver: from_client }, IoThreads { reader, writer }))
}

fn write_loop(outgoing: &Receiver<Message>) -> io::Result<()> {
    for msg in outgoing {
        // One message at a time under stdout's lock: the reader's error
        // replies never interleave with it.
        let mut out = io::stdout().lock();
        msg.write(&mut out)?;
    }
    Ok(())
}

/// What the header block of one message said.
enum Header {
    /// `Content-Length: n`.
    Length(usize),
    /// End of input.
    Eof,
    /// A header block without a usable `Content-Length`, with why.
    Bad(String),
}

/// Reads messages from `input` until it ends or an `exit` notification:
/// each valid one goes to `incoming`, each invalid one is answered
/// through `reply` (raw, framed bytes).
pub(crate) fn read_loop(input: &mut dyn BufRead, incoming: &Sender<Message>, reply: &mut dyn FnMut(Vec<u8>)) {
    loop {
        let length = match read_header(input) {
            Ok(Header::Length(n)) => n,
            Ok(Header::Eof) | Err(_) => return,
            Ok(Header::Bad(why)) => {
                reply(error_reply(serde_json::Value::Null, PARSE_ERROR, &why));
                continue;
            }
        };
        if length > MAX_MESSAGE {
            // Skipped in bounded chunks; the reply says why.
            match io::copy(&mut input.take(length as u64), &mut io::sink()) {
                Ok(n) if n == length as u64 => {}
                _ => return,
            }
            let why = format!("message of {length} bytes is larger than the limit of {MAX_MESSAGE} bytes; ignored");
            reply(error_reply(serde_json::Value::Null, INVALID_REQUEST, &why));
            continue;
        }
        let mut body = vec![0; length];
        if input.read_exact(&mut body).is_err() {
            return;
        }
        let value: serde_json::Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                reply(error_reply(serde_json::Value::Null, PARSE_ERROR, &format!("not JSON: {e}")));
                continue;
            }
        };
        let id = value.get("id").cloned().unwrap_or(serde_json::Value::Null);
        let has_method = value.get("method").is_some();
        match serde_json::from_value::<Message>(value) {
            // A request whose method is not a string reads as a response.
            Ok(Message::Response(_)) if has_method => {
                reply(error_reply(id, INVALID_REQUEST, "not a JSON-RPC message: `method` is not a string"));
            }
            Ok(msg) => {
                let exit = matches!(&msg, Message::Notification(n) if n.method == "exit");
                if incoming.send(msg).is_err() || exit {
                    return;
                }
            }
            Err(e) => reply(error_reply(id, INVALID_REQUEST, &format!("not a JSON-RPC message: {e}"))),
        }
    }
}

/// Reads one header block (up to its empty line).
fn read_header(input: &mut dyn BufRead) -> io::Result<Header> {
    let mut length: Option<Result<usize, String>> = None;
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        let n = input.take(MAX_HEADER_LINE).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(if first { Header::Eof } else { Header::Bad("input ended inside a header".into()) });
        }
        first = false;
        if !line.ends_with(b"\n") {
            // Over-long: skip the rest of the line.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                let n = input.take(MAX_HEADER_LINE).read_until(b'\n', &mut rest)?;
                if n == 0 || rest.ends_with(b"\n") {
                    break;
                }
            }
            length = Some(Err("header line too long".into()));
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            return Ok(match length {
                Some(Ok(n)) => Header::Length(n),
                Some(Err(why)) => Header::Bad(why),
                None => Header::Bad("no Content-Length header".into()),
            });
        }
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = Some(
                    value.trim().parse::<usize>().map_err(|_| format!("invalid Content-Length `{}`", value.trim())),
                );
            }
        } else if length.is_none() {
            length = Some(Err(format!("malformed header `{}`", text.chars().take(80).collect::<String>())));
        }
    }
}

/// A framed JSON-RPC error response.
fn error_reply(id: serde_json::Value, code: i32, message: &str) -> Vec<u8> {
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }).to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    /// The messages passed on and the replies written for `input`.
    fn run(input: &[u8]) -> (Vec<Message>, Vec<serde_json::Value>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut replies = Vec::new();
        read_loop(&mut io::BufReader::new(input), &tx, &mut |raw| {
            let text = String::from_utf8(raw).expect("utf-8");
            let body = text.split_once("\r\n\r\n").expect("framed").1.to_string();
            replies.push(serde_json::from_str(&body).expect("json reply"));
        });
        drop(tx);
        (rx.into_iter().collect(), replies)
    }

    #[test]
    fn malformed_messages_get_errors_and_the_stream_goes_on() {
        let good = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let input = [
            frame("{not json"),
            frame(r#"{"jsonrpc":"2.0","id":7,"method":["x"]}"#),
            frame(r#"{"jsonrpc":"2.0","params":{}}"#),
            "Content-Length: abc\r\n\r\n".to_string(),
            "X-Nothing: 1\r\n\r\n".to_string(),
            frame(good),
        ]
        .concat();
        let (msgs, replies) = run(input.as_bytes());
        assert_eq!(msgs.len(), 1, "the good message passes");
        let codes: Vec<i64> = replies.iter().map(|r| r["error"]["code"].as_i64().expect("code")).collect();
        assert_eq!(codes, vec![-32700, -32600, -32600, -32700, -32700]);
        assert_eq!(replies[1]["id"], 7, "the request's id is kept");
    }

    #[test]
    fn a_huge_content_length_is_not_allocated() {
        let good = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        // Claims far more than it sends: the input ends, nothing allocated.
        let input = "Content-Length: 99999999999999\r\n\r\n{}";
        let (msgs, replies) = run(input.as_bytes());
        assert!(msgs.is_empty() && replies.is_empty());
        // Over the limit and sent: skipped, answered, and the next one read.
        let big = format!("Content-Length: {}\r\n\r\n{}{}", MAX_MESSAGE + 1, " ".repeat(MAX_MESSAGE + 1), frame(good));
        let (msgs, replies) = run(big.as_bytes());
        assert_eq!(msgs.len(), 1);
        assert!(replies[0]["error"]["message"].as_str().expect("message").contains("larger than the limit"));
    }

    #[test]
    fn an_endless_header_line_is_bounded() {
        let good = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let input = format!("X: {}\r\n\r\n{}", "a".repeat(1 << 20), frame(good));
        let (msgs, replies) = run(input.as_bytes());
        assert_eq!(msgs.len(), 1);
        assert_eq!(replies.len(), 1);
    }
}
