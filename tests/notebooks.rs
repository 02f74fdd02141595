//! End-to-end tests of the `memlint` binary on Jupyter notebooks: the
//! fixtures in `fixtures/notebooks/` and temporary trees.

use std::path::{Path, PathBuf};
use std::process::Output;

use tests::*;

fn fixtures() -> PathBuf {
    root().join("fixtures/notebooks")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("json output")
}

/// `path cell:line:col CODE` per diagnostic of a JSON report.
fn located(o: &Output) -> Vec<String> {
    json(o)["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{} {}:{}:{} {}", d["path"].as_str().unwrap(), d["cell"], d["line"], d["column"], d["code"].as_str().unwrap()))
        .collect()
}

fn copy_fixture(dir: &Path, name: &str, to: &str) {
    write(dir, to, std::fs::read(fixtures().join(name)).unwrap());
}

#[test]
fn notebook_full_format_snapshot() {
    // Magics, shell and help lines are never parsed: the only ML000 is the
    // broken cell's.
    let o = memlint(&fixtures(), &["check", "training.ipynb", "broken_cell.ipynb"]);
    assert_eq!(o.status.code(), Some(1));
    insta::assert_snapshot!("notebook_full", stdout(&o));
}

#[test]
fn notebook_concise_format_snapshot() {
    let o = memlint(&fixtures(), &["check", "training.ipynb", "broken_cell.ipynb", "--format", "concise"]);
    insta::assert_snapshot!("notebook_concise", stdout(&o));
}

#[test]
fn notebook_json_format_snapshot() {
    let o = memlint(&fixtures(), &["check", "training.ipynb", "--format", "json"]);
    let v = json(&o);
    // `cell` follows `path`; the other keys keep the order of every file's.
    let keys: Vec<&str> = v["diagnostics"][0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["code", "name", "severity", "path", "cell", "line", "column", "end_line", "end_column", "message", "help", "fix"]
    );
    insta::assert_snapshot!("notebook_json", stdout(&o));
}

#[test]
fn fix_edits_are_located_in_their_cell() {
    let dir = tempfile::tempdir().unwrap();
    let nb = r#"{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": ["import torch"]},
 {"cell_type": "markdown", "metadata": {}, "source": ["Mixed precision"]},
 {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["\n", "scaler = torch.cuda.amp.GradScaler()"]}],
 "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#;
    write(dir.path(), "amp.ipynb", nb);
    let v = json(&memlint(dir.path(), &["check", "amp.ipynb", "--format", "json"]));
    let d = &v["diagnostics"][0];
    assert_eq!((d["code"].as_str(), d["cell"].as_u64(), d["line"].as_u64(), d["column"].as_u64()), (Some("ML401"), Some(3), Some(2), Some(10)));
    let edit = &d["fix"]["edits"][0];
    assert_eq!(edit["content"], "torch.amp.GradScaler");
    let keys: Vec<&str> = edit.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["content", "cell", "line", "column", "end_line", "end_column"]);
    assert_eq!((edit["cell"].as_u64(), edit["line"].as_u64(), edit["column"].as_u64()), (Some(3), Some(2), Some(10)));
}

#[test]
fn python_files_have_no_cell_key() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.py", "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.eval()\nfor x in val_loader:\n    out = model(x)\n");
    copy_fixture(dir.path(), "source_list.ipynb", "b.ipynb");
    let v = json(&memlint(dir.path(), &["check", ".", "--format", "json"]));
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 2);
    assert_eq!(diags[0]["path"], "./a.py");
    assert!(diags[0].get("cell").is_none());
    assert_eq!((diags[0]["line"].as_u64(), diags[0]["column"].as_u64()), (Some(5), Some(11)));
    assert_eq!(diags[1]["path"], "./b.ipynb");
    assert_eq!(diags[1]["cell"], 1);
}

#[test]
fn a_syntax_error_in_one_cell_does_not_hide_the_others() {
    let o = memlint(&fixtures(), &["check", "broken_cell.ipynb", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(located(&o), ["broken_cell.ipynb 2:2:5 ML000", "broken_cell.ipynb 3:3:11 ML201"]);
    let v = json(&o);
    assert_eq!(v["diagnostics"][0]["message"], "syntax error: Expected an expression (and 1 more)");
}

#[test]
fn list_and_string_sources_and_nbformat_3_give_the_same_findings() {
    let o = memlint(
        &fixtures(),
        &["check", "source_list.ipynb", "source_string.ipynb", "nbformat3.ipynb", "--format", "json"],
    );
    assert_eq!(
        located(&o),
        ["nbformat3.ipynb 2:5:11 ML201", "source_list.ipynb 1:5:11 ML201", "source_string.ipynb 1:5:11 ML201"]
    );
}

#[test]
fn malformed_notebooks_are_one_ml000_each_and_the_run_goes_on() {
    let o = memlint(
        &fixtures(),
        &["check", "not_json.ipynb", "no_cells.ipynb", "bad_source.ipynb", "source_list.ipynb", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    let got: Vec<String> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{} {} {}", d["path"].as_str().unwrap(), d["code"].as_str().unwrap(), d["message"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            "bad_source.ipynb ML000 not a notebook: `source` of cell 2 is a number, expected a string or a list of strings",
            "no_cells.ipynb ML000 not a notebook: expected a JSON object with a `cells` list (line 1, column 1)",
            "not_json.ipynb ML000 not a notebook: invalid JSON: expected value (line 1, column 1)",
            "source_list.ipynb ML201 forward pass of `model` in evaluation code runs with autograd enabled",
        ]
    );
    assert!(v["diagnostics"][0].get("cell").is_none(), "a file that is not a notebook has no cells");
    assert_eq!(v["summary"]["files"], 4);
    // Without ML000 the malformed files report nothing.
    let o = memlint(&fixtures(), &["check", "not_json.ipynb", "--ignore", "ML000", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    // The full format names the file and the problem without a frame.
    let o = memlint(&fixtures(), &["check", "no_cells.ipynb"]);
    let text = stdout(&o);
    assert!(text.contains("error[ML000]: parse-error: not a notebook: expected a JSON object with a `cells` list"), "{text}");
    assert!(text.contains("= note: no_cells.ipynb"), "{text}");
}

#[test]
fn suppressions_inside_cells() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixtures().join("training.ipynb")).unwrap();
    write(dir.path(), "as_is.ipynb", &text);
    // Without its comment, cell 7's forward pass is reported in cell 7.
    write(dir.path(), "unsuppressed.ipynb", text.replace("  # memlint: ignore[ML201]", ""));
    // `noqa` works too.
    write(dir.path(), "noqa.ipynb", text.replace("# memlint: ignore[ML201]", "# noqa: ML201"));
    // A file-level suppression in any cell covers every cell.
    write(dir.path(), "file_level.ipynb", text.replace("%matplotlib inline\\n", "%matplotlib inline\\n# memlint: ignore-file[ML2]\\n"));
    let o = memlint(dir.path(), &["check", ".", "--format", "json"]);
    assert_eq!(
        located(&o),
        [
            "./as_is.ipynb 5:8:9 ML202",
            "./as_is.ipynb 6:4:11 ML201",
            "./noqa.ipynb 5:8:9 ML202",
            "./noqa.ipynb 6:4:11 ML201",
            "./unsuppressed.ipynb 5:8:9 ML202",
            "./unsuppressed.ipynb 6:4:11 ML201",
            "./unsuppressed.ipynb 7:2:13 ML201",
        ]
    );
}

#[test]
fn walk_includes_notebooks_and_skips_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture(dir.path(), "source_list.ipynb", "nb/eval.ipynb");
    copy_fixture(dir.path(), "source_list.ipynb", "nb/.ipynb_checkpoints/eval-checkpoint.ipynb");
    copy_fixture(dir.path(), "source_list.ipynb", "nb/Upper.IPYNB");
    copy_fixture(dir.path(), "source_list.ipynb", "generated/out.ipynb");
    copy_fixture(dir.path(), "source_list.ipynb", ".venv/share/x.ipynb");
    copy_fixture(dir.path(), "source_list.ipynb", "build/y.ipynb");
    write(dir.path(), ".gitignore", "generated/\n");
    let o = memlint(dir.path(), &["check", "--format", "json"]);
    let v = json(&o);
    assert_eq!(v["summary"]["files"], 2, "{}", stdout(&o));
    assert_eq!(located(&o), ["./nb/Upper.IPYNB 1:5:11 ML201", "./nb/eval.ipynb 1:5:11 ML201"]);
    // Named explicitly, a checkpoint is checked, and as a notebook.
    let o = memlint(dir.path(), &["check", "nb/.ipynb_checkpoints/eval-checkpoint.ipynb", "--format", "json"]);
    assert_eq!(located(&o), ["nb/.ipynb_checkpoints/eval-checkpoint.ipynb 1:5:11 ML201"]);
    // So is a checkpoints directory named on the command line.
    let o = memlint(dir.path(), &["check", "nb/.ipynb_checkpoints", "--format", "json"]);
    assert_eq!(json(&o)["summary"]["files"], 1);
}

#[test]
fn non_python_kernels_are_not_checked() {
    let dir = tempfile::tempdir().unwrap();
    let r = r#"{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": ["x <- c(1, 2"]}],
 "metadata": {"kernelspec": {"display_name": "R", "language": "R", "name": "ir"}}, "nbformat": 4, "nbformat_minor": 5}"#;
    write(dir.path(), "analysis.ipynb", r);
    let o = memlint(dir.path(), &["check", ".", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["summary"]["files"], 1);
    assert_eq!(v["summary"]["diagnostics"], 0);
}

/// `--fix` rewrites the sources of the cells it fixes, in the notebook's own
/// JSON layout; outputs, metadata, ids and the other cells stay as they
/// were. The two ML401 findings share one fix across cells (the import in
/// cell 2, the uses in cell 3); the edit next to a shell line keeps it.
#[test]
fn fix_rewrites_cell_sources_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture(dir.path(), "amp_fix.ipynb", "amp_fix.ipynb");
    let original = std::fs::read_to_string(dir.path().join("amp_fix.ipynb")).unwrap();

    let o = memlint(dir.path(), &["check", "amp_fix.ipynb", "--diff", "--unsafe-fixes"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(dir.path().join("amp_fix.ipynb")).unwrap(), original, "--diff writes nothing");
    insta::assert_snapshot!("notebook_fix_diff", stdout(&o));

    let o = memlint(dir.path(), &["check", "amp_fix.ipynb", "--fix", "--unsafe-fixes", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&o)["diagnostics"], serde_json::json!([]));
    let fixed = std::fs::read_to_string(dir.path().join("amp_fix.ipynb")).unwrap();
    let (before, after): (serde_json::Value, serde_json::Value) =
        (serde_json::from_str(&original).unwrap(), serde_json::from_str(&fixed).unwrap());
    assert_eq!(before["metadata"], after["metadata"]);
    for (b, a) in before["cells"].as_array().unwrap().iter().zip(after["cells"].as_array().unwrap()) {
        for key in ["cell_type", "id", "metadata", "outputs", "execution_count"] {
            assert_eq!(b[key], a[key], "{key} kept");
        }
    }
    let source = |v: &serde_json::Value, i: usize| -> String {
        match &v["cells"][i]["source"] {
            serde_json::Value::Array(lines) => lines.iter().map(|l| l.as_str().unwrap()).collect(),
            other => other.as_str().unwrap().to_string(),
        }
    };
    assert_eq!(source(&after, 1), "%pip install torch\nimport torch\nfrom torch.amp import GradScaler, autocast");
    assert!(source(&after, 2).contains("scaler = GradScaler(\"cuda\", init_scale=1024)\n"));
    assert!(source(&after, 2).contains("    with autocast(\"cuda\"):\n"));
    assert!(source(&after, 2).ends_with("    total += loss.item()\n!nvidia-smi"));
    assert_eq!(source(&after, 3), source(&before, 3));
    // Only the fixed lines differ, in the file's own layout.
    let changed: Vec<(&str, &str)> = original.lines().zip(fixed.lines()).filter(|(a, b)| a != b).collect();
    assert_eq!(changed.len(), 4, "{changed:?}");
    assert_eq!(original.lines().count(), fixed.lines().count());

    // Fixing again changes nothing.
    let o = memlint(dir.path(), &["check", "amp_fix.ipynb", "--fix", "--unsafe-fixes"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(dir.path().join("amp_fix.ipynb")).unwrap(), fixed);
}

/// Formats that annotate the file itself (GitHub, SARIF, GitLab, JUnit)
/// point at the notebook's JSON line holding the source line, and at the
/// column of the code in it; the human formats say `cell N:line:col`.
#[test]
fn file_annotating_formats_point_into_the_notebook_json() {
    let json = std::fs::read_to_string(fixtures().join("training.ipynb")).unwrap();
    let (line, text) = json.lines().enumerate().find(|(_, l)| l.contains("total += loss")).unwrap();
    let (line, column) = (line + 1, text.find("total").unwrap() + 1);

    let o = memlint(&fixtures(), &["check", "training.ipynb", "--format", "github"]);
    let out = stdout(&o);
    assert!(out.contains(&format!("title=memlint ML202,file=training.ipynb,line={line},endLine={line},col={column},")), "{out}");

    let o = memlint(&fixtures(), &["check", "training.ipynb", "--format", "sarif"]);
    let sarif: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let result = sarif["runs"][0]["results"].as_array().unwrap().iter().find(|r| r["ruleId"] == "ML202").unwrap().clone();
    let region = &result["locations"][0]["physicalLocation"]["region"];
    assert_eq!((region["startLine"].as_u64(), region["startColumn"].as_u64()), (Some(line as u64), Some(column as u64)));

    let o = memlint(&fixtures(), &["check", "training.ipynb", "--format", "grouped"]);
    assert!(stdout(&o).contains("  cell 5:8:9  ML202 [warning]"), "{}", stdout(&o));
}

/// An exercise notebook's blanks (`d_loss = `, `criterion = # TODO`,
/// `def forward(self, x):` with only a comment for body) are not reported;
/// cells that do not parse for another reason are one ML000 for the
/// notebook, naming each; the other cells are still checked.
#[test]
fn cells_that_do_not_parse_are_one_finding() {
    let dir = tempfile::tempdir().unwrap();
    let cells: Vec<serde_json::Value> = [
        "import torch\nfrom torch import nn\n",
        "d_loss = \n",
        "criterion = # TODO\n",
        "x = torch.zeros(3, requires_grad=True)\nx.add_(1)\n",
        "optimizer = \n",
        "class Net(nn.Module):\n    def forward(self, x):\n        # TODO: your code here\n",
        "y = (1,\n",
        "def f(:\n    pass\n",
    ]
    .iter()
    .map(|s| serde_json::json!({"cell_type": "code", "source": s, "metadata": {}, "outputs": [], "execution_count": null}))
    .collect();
    let nb = serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    std::fs::write(dir.path().join("exercise.ipynb"), nb.to_string()).unwrap();
    let o = memlint(dir.path(), &["check", "exercise.ipynb", "--format", "json"]);
    assert_eq!(located(&o), ["exercise.ipynb 4:2:3 ML101", "exercise.ipynb 7:1:8 ML000"]);
    let message = json(&o)["diagnostics"][1]["message"].as_str().unwrap().to_string();
    assert!(message.ends_with("2 cells do not parse: cells 7, 8"), "{message}");
}

/// A notebook's code cells as nbformat 4 JSON.
fn notebook_of(cells: &[&str]) -> String {
    let cells: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| serde_json::json!({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": c}))
        .collect();
    serde_json::json!({"cells": cells, "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5})
        .to_string()
}

#[test]
fn notebooks_see_the_helpers_they_import_from_the_project() {
    // The course's shape: the batch loop lives in `engine.train_step`, the
    // notebook's epoch loop calls it. A sample drawn once per epoch in the
    // notebook is not per step; one drawn in the notebook's own batch loop
    // is. `train.py` beside `train.ipynb` keeps its module path.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "engine.py",
        "import torch\n\n\ndef train_step(model, loader, opt, device):\n    for x, y in loader:\n        x, y = x.to(device), y.to(device)\n        loss = torch.nn.functional.cross_entropy(model(x), y)\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n",
    );
    write(dir.path(), "train.py", "def helper():\n    return 1\n");
    let nb = notebook_of(&[
        "import torch\nfrom engine import train_step\ndevice = 'cuda'\n",
        "def fit(model, loader, opt, writer, epochs):\n    for epoch in range(epochs):\n        train_step(model, loader, opt, device)\n        writer.add_graph(model, torch.randn(8, 3).to(device))\n",
        "def fit_here(model, loader, opt):\n    for x, y in loader:\n        noise = torch.randn(8, 3).to(device)\n        loss = torch.nn.functional.cross_entropy(model(x.to(device) + noise), y.to(device))\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n",
        "fit(model, loader, opt, writer, 10)\nfit_here(model, loader, opt)\n",
    ]);
    write(dir.path(), "train.ipynb", nb);
    let o = memlint(dir.path(), &["check", "--select", "ML306", "--format", "json"]);
    assert_eq!(located(&o), ["./train.ipynb 3:3:17 ML306"], "{}", stdout(&o));
}

#[test]
fn a_notebook_whose_only_torch_is_a_writefile_cell_is_checked() {
    // The joined module (the `%%writefile` cell left out) imports nothing:
    // the notebook is still checked, and its cell as a module of its own.
    let dir = tempfile::tempdir().unwrap();
    let nb = notebook_of(&[
        "print('hi')\n",
        "%%writefile evaluate.py\nimport torch\n\n\ndef evaluate(model, val_loader):\n    model.eval()\n    for x, y in val_loader:\n        out = model(x)\n",
    ]);
    write(dir.path(), "w.ipynb", nb);
    let o = memlint(dir.path(), &["check", "--format", "json"]);
    assert_eq!(located(&o), ["./w.ipynb 2:8:15 ML201"], "{}", stdout(&o));
}
