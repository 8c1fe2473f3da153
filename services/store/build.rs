// refinery embeds the migrations at compile time; without this, adding a migration file does not
// trigger a rebuild (notes on refinery: it has no build script of its own).
//
// The replaceable objects (`sql/functions/*.sql`, one function with its triggers per file) are
// embedded too: this writes `$OUT_DIR/sql_objects.rs`, a sorted list of `(file stem, contents)`
// that `sql_objects::FILES` includes.
use std::fmt::Write as _;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=../../sql/migrations");
    println!("cargo:rerun-if-changed=../../sql/functions");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sql/functions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "sql"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from("&[\n");
    for f in &files {
        let stem = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let abs = f.canonicalize().unwrap_or_else(|_| f.clone());
        let _ = writeln!(
            out,
            "    ({stem:?}, include_str!({:?})),",
            abs.display().to_string()
        );
    }
    out.push(']');
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("sql_objects.rs");
    if let Err(e) = std::fs::write(&dest, out) {
        println!("cargo:warning=cannot write {}: {e}", dest.display());
    }
}
