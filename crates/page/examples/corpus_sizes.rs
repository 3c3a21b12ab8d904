//! Prints every built-in page's objects and sizes (what the tests pin).
fn main() {
    for name in quiclab_page::builtin_names() {
        let Some(page) = quiclab_page::builtin(name) else {
            continue;
        };
        let sizes: Vec<u64> = page.embedded().iter().map(|o| o.size).collect();
        println!(
            "{name}: {} objects + index.html {} B; embedded {} B; total {} B; min {:?} max {:?}",
            page.embedded().len(),
            page.index().size,
            page.embedded_bytes(),
            page.total_bytes(),
            sizes.iter().min(),
            sizes.iter().max()
        );
        if name.contains("small") && name.starts_with("megyesi") {
            println!("  sizes: {sizes:?}");
        }
    }
}
