//! Every file of every fuzz target's corpus (`fuzz/corpus/<target>/`), run
//! through the target's function on stable: the inputs that once crashed a
//! decoder stay fixed, and CI's `cargo test` checks them on each run.

use std::path::Path;

use kstreams_fuzz_harness::TARGETS;

#[test]
fn every_corpus_file_decodes_without_a_panic() {
    let corpus_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    for (name, run) in TARGETS {
        let dir = corpus_root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("corpus of {name} at {}: {e}", dir.display()))
            .map(|entry| entry.expect("a corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "the corpus of {name} is empty");
        for file in &files {
            let input = std::fs::read(file).expect("a corpus file");
            let outcome = std::panic::catch_unwind(|| run(&input));
            assert!(
                outcome.is_ok(),
                "{name}: {} panicked (replay: cargo fuzz run {name} {})",
                file.display(),
                file.display()
            );
        }
        eprintln!("{name}: {} corpus files", files.len());
    }
}
