//! Golden IR dumps: each `tests/golden/*.rs` (code written against tch
//! 0.24) lowers to exactly the IR in the `.ir` file beside it. The dumps
//! were reviewed by hand when written; a change of the lowering shows here
//! as a diff. `MEMLINT_BLESS=1 cargo test -p memlint_rust --test golden`
//! rewrites them (review the diff before committing).

use std::path::Path;

#[test]
fn tch_snippets_lower_to_their_golden_ir() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("MEMLINT_BLESS").is_some();
    let mut snippets: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    snippets.sort();
    assert!(snippets.len() >= 6, "6-8 snippets expected, found {}", snippets.len());
    let mut failures = Vec::new();
    for rs in &snippets {
        let source = std::fs::read_to_string(rs).expect("snippet");
        let module = memlint_rust::parse(&source).unwrap_or_else(|e| panic!("{}: {}", rs.display(), e.message));
        let dump = memlint_semantic::ir::dump(&module);
        let golden = rs.with_extension("ir");
        if bless {
            std::fs::write(&golden, &dump).expect("write golden");
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != dump {
            let diff = similar::TextDiff::from_lines(&expected, &dump);
            failures.push(format!("{}:\n{}", golden.display(), diff.unified_diff().header("golden", "lowered")));
        }
    }
    assert!(failures.is_empty(), "IR differs from the golden dumps:\n{}", failures.join("\n"));
}

#[test]
fn a_syntax_error_names_its_place() {
    let err = memlint_rust::parse("fn main() {\n    let x = ;\n}\n").expect_err("not Rust");
    assert_eq!(err.span.start, 24, "{}", err.message);
}

#[test]
fn ids_and_spans_index_the_file() {
    // Spans are byte offsets into this file, also for the second file
    // parsed on a thread (the span map is per thread and reset).
    for _ in 0..2 {
        let src = "use tch::Tensor;\nfn f(x: &Tensor) -> Tensor { x.relu() }\n";
        let m = memlint_rust::parse(src).expect("parses");
        let memlint_semantic::ir::StmtKind::Function(f) = &m.body[1].kind else { panic!("a function") };
        assert_eq!(&src[f.name_span.start as usize..f.name_span.end as usize], "f");
        let memlint_semantic::ir::StmtKind::Return(Some(ret)) = &f.body[0].kind else { panic!("the tail returns") };
        assert_eq!(&src[ret.span.start as usize..ret.span.end as usize], "x.relu()");
        assert_eq!(m.tree.enclosing_function(f.body[0].id), Some(m.body[1].id));
    }
}

#[test]
fn statements_in_closures_and_block_values_belong_to_their_statement() {
    use memlint_semantic::ir::{Arm, StmtKind};
    let src = "fn f(w: &Tensor, x: &Tensor) {\n    for i in 0..3 {\n        tch::no_grad(|| { w.copy_(x); });\n        let y = { let z = i; z };\n    }\n}\n";
    let m = memlint_rust::parse(src).expect("parses");
    let t = &m.tree;
    let find = |text: &str| {
        t.ids()
            .find(|&id| m.stmt(id).is_some_and(|s| src[s.span.start as usize..].starts_with(text)))
            .unwrap_or_else(|| panic!("no statement `{text}`"))
    };
    let (for_, no_grad, copy, let_y, let_z) =
        (find("for i"), find("tch::no_grad"), find("w.copy_"), find("let y"), find("let z"));
    assert!(matches!(m.stmt(for_).map(|s| &s.kind), Some(StmtKind::For { .. })));
    // The closure's body runs when called: it belongs to the call's
    // statement, outside the loop's reach.
    assert_eq!((t.parent(copy), t.arm(copy)), (Some(no_grad), Arm::Closure));
    assert_eq!(t.enclosing_loop(copy), None);
    // A block value runs where it stands.
    assert_eq!((t.parent(let_z), t.arm(let_z)), (Some(let_y), Arm::Inline));
    assert_eq!(t.enclosing_loop(let_z), Some(for_));
    assert!(t.contains(for_, let_z) && t.contains(no_grad, copy));
    // Expressions after a nested statement still belong to theirs: the
    // tail `z` of the block to `let y`.
    let Some(StmtKind::Assign { value, .. }) = m.stmt(let_y).map(|s| &s.kind) else { panic!("let y") };
    let memlint_semantic::ir::ExprKind::Block(b) = &value.kind else { panic!("a block value") };
    assert_eq!(t.owner(b.tail.as_ref().expect("tail").id), Some(let_y));
    assert_eq!(t.owner(value.id), Some(let_y));
}
