//! The packed form of a parse (`Parsed::pack`, which the driver keeps
//! between its two walks) unpacks to the same module: the same nodes,
//! spans, ids, statement tree and comments, for every fixture and example
//! of both languages and for the partial trees of files with syntax errors.
//! A damaged stream unpacks to `None`, never to a panic.

use std::path::{Path, PathBuf};

use memlint_linter::frontend::{frontend_for, Parsed};

fn sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in ["fixtures/python", "fixtures/rust", "examples"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if frontend_for(&path).is_some() {
                    let text = std::fs::read_to_string(&path).unwrap();
                    out.push((path, text));
                }
            }
        }
    }
    out.sort();
    out
}

/// Everything a later walk reads of a parse, as text.
fn shape(p: &Parsed) -> String {
    format!("{:?}\n{:?}\n{:?}", p.module, p.comments, p.errors)
}

#[test]
fn every_fixture_and_example_unpacks_to_the_module_it_was_packed_from() {
    let mut files = 0;
    for (path, text) in sources() {
        let parsed = frontend_for(&path).unwrap().parse(&text);
        let packed = parsed.pack();
        let back = packed.unpack().unwrap_or_else(|| panic!("{}: does not unpack", path.display()));
        assert_eq!(shape(&back), shape(&parsed), "{}", path.display());
        assert!(back.module_facts.is_none());
        files += 1;
    }
    assert!(files >= 30, "{files} files");
}

#[test]
fn partial_trees_of_broken_files_round_trip() {
    let mut checked = 0;
    for (path, text) in sources() {
        let frontend = frontend_for(&path).unwrap();
        // Cut at a few places: the parser recovers a partial tree, with
        // errors, that must round-trip as well.
        for cut in [text.len() / 3, text.len() / 2, text.len() * 4 / 5] {
            let Some(cut) = (cut..text.len()).find(|&i| text.is_char_boundary(i)) else { continue };
            let broken = format!("{}(\n", &text[..cut]);
            let parsed = frontend.parse(&broken);
            let back = parsed.pack().unpack().expect("unpacks");
            assert_eq!(shape(&back), shape(&parsed), "{} cut at {cut}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 60);
}

#[test]
fn a_damaged_stream_is_refused_without_a_panic() {
    let text = "import torch\nfor x, y in loader:\n    loss = model(x).sum()  # step\n    loss.backward()\n";
    let parsed = frontend_for(Path::new("t.py")).unwrap().parse(text);
    let bytes = memlint_semantic::ir::pack::pack(&parsed.module, &parsed.comments);
    assert!(memlint_semantic::ir::pack::unpack(&bytes).is_some());
    for n in 0..bytes.len() {
        assert!(memlint_semantic::ir::pack::unpack(&bytes[..n]).is_none(), "a prefix of {n} bytes unpacked");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(memlint_semantic::ir::pack::unpack(&longer).is_none());
    // Every byte changed to every value: a result or `None`, never a panic
    // or an allocation the stream's length cannot back.
    for at in 0..bytes.len() {
        for value in [0u8, 1, 0x7f, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[at] = value;
            let _ = memlint_semantic::ir::pack::unpack(&damaged);
        }
        // A varint near `u64::MAX` where any integer stands (a span delta
        // that would overflow, a length or a name number far too large).
        // Zigzag-decoded, the first is `i64::MIN`, the second `i64::MAX`.
        for first in [0xff, 0xfe] {
            let mut damaged = bytes.clone();
            damaged.splice(at..at, [first].into_iter().chain([0xff; 8]).chain([0x01]));
            let _ = memlint_semantic::ir::pack::unpack(&damaged);
        }
    }
}
