// refinery embeds the migrations at compile time; without this, adding a migration file does not
// trigger a rebuild (notes/crate-probes.md, refinery).
fn main() {
    println!("cargo:rerun-if-changed=../../sql/migrations");
}
