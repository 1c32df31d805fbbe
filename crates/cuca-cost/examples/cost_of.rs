//! Prices one call: `cargo run -p cuca-cost --example cost_of -- [--prices FILE] MODEL
//! [input=N] [output=N] [cache_read=N] [cache_write_5m=N] [cache_write_1h=N] [reasoning=N]`.

use cuca_cost::{PriceTable, Usage};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let owned;
    let table: &PriceTable = if args.first().map(String::as_str) == Some("--prices") {
        let file = args.get(1).ok_or("--prices needs a FILE")?.clone();
        args.drain(..2);
        owned = PriceTable::from_file(file)?;
        &owned
    } else {
        PriceTable::bundled()?
    };
    let (model, counts) = args
        .split_first()
        .ok_or("usage: cost_of [--prices FILE] MODEL [kind=N]...")?;
    let mut usage = Usage::default();
    for count in counts {
        let (kind, n) = count
            .split_once('=')
            .ok_or_else(|| format!("{count}: not kind=N"))?;
        let n: u64 = n.parse().map_err(|e| format!("{count}: {e}"))?;
        match kind {
            "input" => usage.input = n,
            "output" => usage.output = n,
            "cache_read" => usage.cache_read = n,
            "cache_write_5m" => usage.cache_write_5m = n,
            "cache_write_1h" => usage.cache_write_1h = n,
            "reasoning" => usage.reasoning = n,
            other => return Err(format!("{other}: not a token kind").into()),
        }
    }
    let Some(price) = table.price(model) else {
        println!("{model}: unknown, no price in {}", table.source());
        return Ok(());
    };
    let cost = price.cost(&usage);
    println!(
        "{model} (entry {}, priced by {})",
        price.model,
        table.source()
    );
    for (kind, usd) in [
        ("input", cost.input),
        ("output", cost.output),
        ("cache read", cost.cache_read),
        ("cache write 5m", cost.cache_write_5m),
        ("cache write 1h", cost.cache_write_1h),
        ("reasoning", cost.reasoning),
    ] {
        println!("  {kind:<15} ${usd:.6}");
    }
    if let Some(tier) = cost.tier_above_tokens {
        println!("  long-context tier: prompt past {tier} tokens");
    }
    println!("  total           ${:.6}", cost.total());
    Ok(())
}
