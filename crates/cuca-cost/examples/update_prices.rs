//! Regenerates the bundled snapshot from a LiteLLM `model_prices_and_context_window.json`.
//!
//! `cargo run -p cuca-cost --example update_prices -- FILE "NAME" YYYY-MM-DD` writes
//! `data/litellm-prices.json.gz` and `data/source.json`; `docs/cost.md` says where to get FILE.

use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, name, date] = args.as_slice() else {
        return Err("usage: update_prices FILE \"SOURCE NAME\" YYYY-MM-DD".into());
    };
    let json = std::fs::read_to_string(file)?;
    let trimmed = cuca_cost::trim_litellm_json(&json, file)?;
    // Parse what is about to be shipped, so a snapshot that would not load is never written.
    let table = cuca_cost::PriceTable::from_json(&trimmed)?;
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    // Level 9 and a zero mtime in the header: the same input gives the same bytes.
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    gz.write_all(trimmed.as_bytes())?;
    std::fs::write(data.join("litellm-prices.json.gz"), gz.finish()?)?;
    let source = serde_json::json!({ "name": name, "date": date });
    std::fs::write(
        data.join("source.json"),
        format!("{}\n", serde_json::to_string_pretty(&source)?),
    )?;
    println!(
        "{} models, {} bytes of JSON, written to {}",
        table.len(),
        trimmed.len(),
        data.display()
    );
    Ok(())
}
