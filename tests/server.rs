//! `memlint server` end to end: the binary driven over stdio with real LSP
//! messages (initialize, didOpen, didChange, codeAction, didSave, didClose,
//! shutdown, exit).

use tests::*;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(30);

struct Client {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    /// Messages received but not yet asked for, in arrival order.
    backlog: RefCell<VecDeque<Value>>,
    next_id: i64,
}

fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            length = v.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

impl Client {
    fn start(dir: &std::path::Path) -> Client {
        let mut child = Command::new(memlint_bin())
            .arg("server")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("memlint server starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(m) = read_message(&mut reader) {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        Client { child, stdin, messages, backlog: RefCell::new(VecDeque::new()), next_id: 1 }
    }

    fn send(&mut self, v: Value) {
        let body = serde_json::to_string(&v).expect("json");
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write to server");
        self.stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait_for(|m| m["id"] == id && m.get("method").is_none())
    }

    /// The next message, from the backlog first.
    fn next(&self, deadline: Instant) -> Value {
        if let Some(m) = self.backlog.borrow_mut().pop_front() {
            return m;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        self.messages.recv_timeout(left).expect("the server answers in time")
    }

    /// The first message matching `pred`; the others stay in the backlog, in order.
    fn wait_for(&self, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        let mut skipped = Vec::new();
        let found = loop {
            let m = self.next(deadline);
            if pred(&m) {
                break m;
            }
            skipped.push(m);
        };
        let mut backlog = self.backlog.borrow_mut();
        for m in skipped.into_iter().rev() {
            backlog.push_front(m);
        }
        found
    }

    /// The next publishDiagnostics for `uri` with `version`.
    fn diagnostics(&self, uri: &str, version: Option<i64>) -> Vec<Value> {
        let m = self.wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && version.is_none_or(|v| m["params"]["version"] == v)
        });
        m["params"]["diagnostics"].as_array().cloned().unwrap_or_default()
    }
}

impl Client {
    /// Every publishDiagnostics for `uri` (version, diagnostics) up to the one of `version`.
    fn publishes_until(&self, uri: &str, version: i64) -> Vec<(i64, Vec<Value>)> {
        let mut seen: Vec<(i64, Vec<Value>)> = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while seen.last().map(|(v, _)| *v) != Some(version) {
            let m = self.next(deadline);
            if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri {
                let diags = m["params"]["diagnostics"].as_array().cloned().unwrap_or_default();
                seen.push((m["params"]["version"].as_i64().unwrap_or(-1), diags));
            }
        }
        seen
    }
}

fn codes(diags: &[Value]) -> Vec<&str> {
    diags.iter().map(|d| d["code"].as_str().unwrap_or("?")).collect()
}

const AMP_AND_LOSS: &str = "import torch\n\n\ndef train(model, loader, optimizer):\n    scaler = torch.cuda.amp.GradScaler()\n    total = 0\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n        total += loss\n    return total, scaler\n";

#[test]
fn lsp_session_over_stdio() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The configuration discovered for the file applies: ML201 is ignored.
    write(dir.path(), "pkg/memlint.toml", "ignore = [\"ML201\"]\n");
    let file = dir.path().join("pkg/train.py");
    write(dir.path(), "pkg/train.py", AMP_AND_LOSS);
    // The project requires torch >= 2.4: the ML401 fix is safe ("Fix all safe").
    write(dir.path(), "pkg/requirements.txt", "torch>=2.4\n");
    let uri = format!("file://{}", file.display());

    let mut c = Client::start(dir.path());
    let init = c.request(
        "initialize",
        json!({"processId": null, "rootUri": null, "capabilities": {"general": {"positionEncodings": ["utf-16"]}}}),
    );
    let caps = &init["result"]["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-16", "{init}");
    assert_eq!(caps["textDocumentSync"]["change"], 2, "incremental sync");
    assert!(caps["codeActionProvider"]["codeActionKinds"].as_array().is_some_and(|k| k.contains(&json!("quickfix"))));
    assert_eq!(init["result"]["serverInfo"]["name"], "memlint");
    c.notify("initialized", json!({}));

    // didOpen: the same findings as `memlint check`.
    let with_eval = format!("{AMP_AND_LOSS}\n\ndef evaluate(model, x):\n    model.eval()\n    return model(x)\n");
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": with_eval}}));
    let diags = c.diagnostics(&uri, Some(1));
    assert_eq!(codes(&diags), ["ML401", "ML202"], "ML201 is ignored by pkg/memlint.toml: {diags:?}");
    let amp = &diags[0];
    assert_eq!(amp["range"], json!({"start": {"line": 4, "character": 13}, "end": {"line": 4, "character": 38}}));
    assert_eq!(amp["severity"], 2);
    assert_eq!(amp["source"], "memlint");
    assert!(amp["message"].as_str().is_some_and(|m| m.starts_with("deprecated-cuda-amp: ")));
    assert!(amp["codeDescription"]["href"].as_str().is_some_and(|h| h.ends_with("docs/rules/ML401.md")));
    assert!(amp["relatedInformation"][0]["message"].as_str().is_some_and(|m| m.starts_with("help: use `torch.amp.GradScaler")));

    // didChange: the accumulation is fixed in the editor; only ML401 remains.
    let changed = AMP_AND_LOSS.replace("total += loss", "total += loss.item()");
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": changed}]}));
    let diags = c.diagnostics(&uri, Some(2));
    assert_eq!(codes(&diags), ["ML401"]);

    // An incremental change (UTF-16 positions, after a non-ASCII comment):
    // `scaler = torch.cuda.amp.GradScaler()` becomes `... .GradScaler(); x = 1`.
    let edited = changed.replacen("import torch\n", "import torch  # é😀\n", 1);
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": edited}]}));
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 4}, "contentChanges": [
        {"range": {"start": {"line": 0, "character": 16}, "end": {"line": 0, "character": 19}}, "text": "x"},
        {"range": {"start": {"line": 4, "character": 40}, "end": {"line": 4, "character": 40}}, "text": "; y = 1"},
    ]}));
    let diags = c.diagnostics(&uri, Some(4));
    assert_eq!(codes(&diags), ["ML401"]);
    assert_eq!(diags[0]["range"]["start"], json!({"line": 4, "character": 13}));
    let resp = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": diags[0]["range"], "context": {"diagnostics": [diags[0]]}}),
    );
    let ignore = resp["result"].as_array().and_then(|a| a.iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Ignore")))).cloned();
    let ignore = ignore.expect("ignore action");
    assert_eq!(ignore["edit"]["changes"][&uri][0]["range"]["start"], json!({"line": 4, "character": 47}), "after `; y = 1`");
    let fix_all = resp["result"].as_array().and_then(|a| a.iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Fix all")))).cloned();
    let new_text = fix_all.expect("fix all")["edit"]["changes"][&uri][0]["newText"].as_str().unwrap_or("").to_string();
    assert!(new_text.starts_with("import torch  # x\n"), "{new_text}");
    assert!(new_text.contains("scaler = torch.amp.GradScaler(\"cuda\"); y = 1\n"), "{new_text}");
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 5}, "contentChanges": [{"text": changed}]}));
    let diags = c.diagnostics(&uri, Some(5));

    // codeAction on the ML401 range: its fix, the ignore comment, fix all.
    let resp = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": diags[0]["range"], "context": {"diagnostics": [diags[0]]}}),
    );
    let actions = resp["result"].as_array().expect("actions");
    let titles: Vec<&str> = actions.iter().map(|a| a["title"].as_str().unwrap_or("")).collect();
    let fix = actions.iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Fix ML401"))).expect("Fix ML401");
    assert_eq!(fix["kind"], "quickfix");
    assert_eq!(fix["isPreferred"], true);
    let edits = fix["edit"]["changes"][&uri].as_array().expect("edits");
    assert_eq!(edits[0]["newText"], "torch.amp.GradScaler");
    assert_eq!(edits[1], json!({"range": {"start": {"line": 4, "character": 39}, "end": {"line": 4, "character": 39}}, "newText": "\"cuda\""}));
    let ignore = actions.iter().find(|a| a["title"].as_str().is_some_and(|t| t.starts_with("Ignore ML401"))).expect("ignore quick fix");
    assert_eq!(ignore["edit"]["changes"][&uri][0]["newText"], "  # memlint: ignore[ML401]");
    assert_eq!(ignore["edit"]["changes"][&uri][0]["range"]["start"], json!({"line": 4, "character": 40}));
    assert!(titles.iter().any(|t| t.starts_with("Fix all safe")), "{titles:?}");

    // source.fixAll only: just the fix-all action, replacing the document.
    let resp = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
               "context": {"diagnostics": [], "only": ["source.fixAll"]}}),
    );
    let actions = resp["result"].as_array().expect("actions");
    assert_eq!(actions.len(), 1, "{actions:?}");
    let new_text = actions[0]["edit"]["changes"][&uri][0]["newText"].as_str().expect("text");
    assert!(new_text.contains("scaler = torch.amp.GradScaler(\"cuda\")"), "{new_text}");

    // Newest version wins: of rapid changes, the last one is published last.
    for v in 6..=8 {
        let text = if v == 8 { changed.replace("torch.cuda.amp.GradScaler()", "torch.amp.GradScaler(\"cuda\")") } else { changed.clone() };
        c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": v}, "contentChanges": [{"text": text}]}));
    }
    let versions: Vec<i64> = c.publishes_until(&uri, 8).into_iter().map(|(v, _)| v).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "never an older version after a newer one: {versions:?}");
    let resp = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 20, "character": 0}}, "context": {"diagnostics": []}}),
    );
    assert_eq!(resp["result"], json!([]), "version 8 has nothing to fix or ignore");

    // didSave lints again (with the configuration read anew).
    write(dir.path(), "pkg/memlint.toml", "ignore = [\"ML201\"]\nextend-select = []\n");
    c.notify("textDocument/didSave", json!({"textDocument": {"uri": uri}}));
    assert!(c.diagnostics(&uri, Some(8)).is_empty());

    // A broken configuration is shown to the user, naming the file.
    write(dir.path(), "pkg/memlint.toml", "select = [\"ML977\"]\n");
    c.notify("textDocument/didSave", json!({"textDocument": {"uri": uri}}));
    let shown = c.wait_for(|m| m["method"] == "window/showMessage");
    let text = shown["params"]["message"].as_str().unwrap_or("");
    assert!(text.contains("memlint.toml") && text.contains("ML977"), "{shown}");
    assert_eq!(shown["params"]["type"], 1, "an error message");
    write(dir.path(), "pkg/memlint.toml", "ignore = [\"ML201\"]\n");

    // An unknown request is an error response, not a crash.
    let resp = c.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}));
    assert_eq!(resp["error"]["code"], -32601);

    // didClose clears the file's diagnostics.
    c.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}));
    assert!(c.diagnostics(&uri, None).is_empty());

    // A Rust (tch) document is linted too, its `//` suppressions honoured.
    let rs_uri = format!("file://{}", dir.path().join("pkg/train.rs").display());
    let rust = "use tch::{nn, Tensor};\n\nfn train(opt: &mut nn::Optimizer, xs: &Tensor) {\n    for _ in 0..10 {\n        xs.sum(tch::Kind::Float).backward();\n        opt.step();\n    }\n}\n";
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": rs_uri, "languageId": "rust", "version": 1, "text": rust}}));
    let diags = c.diagnostics(&rs_uri, Some(1));
    assert_eq!(codes(&diags), ["ML105"], "{diags:?}");
    assert_eq!(diags[0]["range"]["start"], json!({"line": 5, "character": 8}));
    let suppressed = rust.replace("opt.step();", "opt.step(); // memlint: ignore[ML105]");
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": rs_uri, "version": 2}, "contentChanges": [{"text": suppressed}]}));
    assert!(c.diagnostics(&rs_uri, Some(2)).is_empty());

    let resp = c.request("shutdown", Value::Null);
    assert!(resp.get("error").is_none(), "{resp}");
    c.notify("exit", Value::Null);
    drop(c.stdin);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = c.child.try_wait().expect("wait") {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "the server exits after `exit`");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn large_file_does_not_block_the_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    // About 2.7 MB that takes the (debug) linter a second or more.
    let body: String = (0..40_000).map(|i| format!("def f{i}(model, x):\n    y = torch.relu(model(x))\n    return y * 2\n\n")).collect();
    let big = format!("import torch\n{body}");
    let mut c = Client::start(dir.path());
    c.request("initialize", json!({"processId": null, "rootUri": null, "capabilities": {}}));
    c.notify("initialized", json!({}));
    let uri = format!("file://{}/big.py", dir.path().display());
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": big}}));
    // The loop answers while the big version is being linted...
    let resp = c.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}));
    assert!(resp["error"].is_object());
    assert!(
        !c.backlog.borrow().iter().any(|m| m["method"] == "textDocument/publishDiagnostics"),
        "the request was answered before the large file's lint finished"
    );
    // ...and takes the next version, which is what ends up published.
    let small = "import torch\nscaler = torch.cuda.amp.GradScaler()\n";
    c.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": small}]}));
    let publishes = c.publishes_until(&uri, 2);
    let versions: Vec<i64> = publishes.iter().map(|(v, _)| *v).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    let (_, diags) = publishes.last().expect("version 2 published");
    assert_eq!(codes(diags), ["ML401"]);
    c.request("shutdown", Value::Null);
    c.notify("exit", Value::Null);
    let _ = c.child.wait();
}

/// Anything a client sends, and anything a document holds, leaves the
/// server running: malformed messages get JSON-RPC errors, a document
/// nested too deeply is one finding.
#[test]
fn malformed_messages_and_hostile_documents_do_not_end_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Client::start(dir.path());
    c.request("initialize", json!({"processId": null, "rootUri": null, "capabilities": {}}));
    c.notify("initialized", json!({}));

    // Not JSON, then no Content-Length: parse errors with a null id.
    write!(c.stdin, "Content-Length: 9\r\n\r\n{{not json").expect("write");
    write!(c.stdin, "X-Nothing: 1\r\n\r\n").expect("write");
    c.stdin.flush().expect("flush");
    let e = c.wait_for(|m| m.get("error").is_some());
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert!(e["id"].is_null());
    let e = c.wait_for(|m| m.get("error").is_some());
    assert_eq!(e["error"]["code"], -32700, "{e}");

    // A request with unusable parameters: an error for that request only.
    let r = c.request("textDocument/codeAction", json!({"textDocument": 5}));
    assert!(r.get("error").is_some(), "{r}");

    // A document nested too deeply, and one with findings after it.
    let deep = format!("x = {}1\n", "-".repeat(10_000));
    let uri = format!("file://{}", dir.path().join("deep.py").display());
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": deep}}));
    let diags = c.diagnostics(&uri, Some(1));
    assert_eq!(codes(&diags), ["ML000"]);
    assert!(diags[0]["message"].as_str().is_some_and(|m| m.contains("nested too deeply")), "{diags:?}");
    let uri = format!("file://{}", dir.path().join("train.py").display());
    c.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": AMP_AND_LOSS}}));
    assert!(codes(&c.diagnostics(&uri, Some(1))).contains(&"ML401"));

    let r = c.request("shutdown", json!(null));
    assert!(r["error"].is_null(), "{r}");
    c.notify("exit", json!(null));
    let status = c.child.wait().expect("exit");
    assert!(status.success(), "{status}");
}
