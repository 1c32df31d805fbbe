//! One model's prices, the token counts of a call, and what they cost.

/// The token counts of one model call, each kind apart, as the provider reported them.
///
/// `input` is the *uncached* prompt: Anthropic's `input_tokens` as sent; for OpenAI, whose
/// `prompt_tokens` include the cached ones, `prompt_tokens - cached_tokens`. `output` is every
/// generated token, reasoning included (OpenAI's `completion_tokens`, Anthropic's
/// `output_tokens`); `reasoning` is the part of `output` that was reasoning, priced apart only
/// where the list has a reasoning price. So no token is counted twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens read neither from nor into a cache.
    pub input: u64,
    /// Generated tokens, reasoning included.
    pub output: u64,
    /// Prompt tokens read from the provider's cache (Anthropic `cache_read_input_tokens`,
    /// OpenAI `cached_tokens`).
    pub cache_read: u64,
    /// Prompt tokens written to a 5-minute cache (Anthropic `ephemeral_5m_input_tokens`, or
    /// `cache_creation_input_tokens` when the answer gives no split).
    pub cache_write_5m: u64,
    /// Prompt tokens written to a 1-hour cache (Anthropic `ephemeral_1h_input_tokens`).
    pub cache_write_1h: u64,
    /// The part of `output` that was reasoning (OpenAI `reasoning_tokens`).
    pub reasoning: u64,
}

impl Usage {
    /// The prompt's size as the long-context tiers count it: every input token, cached or not.
    /// LiteLLM compares its `prompt_tokens` (for Anthropic, input + cache creation + cache read)
    /// with a tier's threshold, and so does this crate.
    pub fn prompt(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write_5m)
            .saturating_add(self.cache_write_1h)
    }
}

/// USD per token for each kind, as a model's entry gives them. A kind the list leaves out is
/// `None`; [`ModelPrice::cost`] says what it falls back to.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// `input_cost_per_token`.
    pub input: Option<f64>,
    /// `output_cost_per_token`.
    pub output: Option<f64>,
    /// `cache_read_input_token_cost`.
    pub cache_read: Option<f64>,
    /// `cache_creation_input_token_cost` (Anthropic's 5-minute write).
    pub cache_write_5m: Option<f64>,
    /// `cache_creation_input_token_cost_above_1hr` (Anthropic's 1-hour write).
    pub cache_write_1h: Option<f64>,
    /// `output_cost_per_reasoning_token`.
    pub reasoning: Option<f64>,
}

/// A long-context tier: the rates that replace the base ones for a whole call whose prompt is
/// past `above_tokens` (`input_cost_per_token_above_200k_tokens` and its siblings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tier {
    /// The threshold from the key's name (`…_above_200k_tokens` is 200 000). A prompt of
    /// exactly this many tokens is still below it.
    pub above_tokens: u64,
    /// The tier's rates; a kind the tier leaves out keeps the rate below it.
    pub rates: Rates,
}

/// One model's entry in a price table.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPrice {
    /// The entry's key in the table, which may differ from the name looked up.
    pub model: String,
    /// `litellm_provider`, e.g. `anthropic`, `openai`, `bedrock_converse`.
    pub provider: Option<String>,
    /// Base rates; `input` and `output` are always present in a table's entries.
    pub rates: Rates,
    /// Long-context tiers, lowest threshold first.
    pub tiers: Vec<Tier>,
}

/// What one call cost in USD, split by token kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    /// Uncached input.
    pub input: f64,
    /// Output that is not reasoning (all output when the model has no reasoning price).
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// 5-minute cache writes.
    pub cache_write_5m: f64,
    /// 1-hour cache writes.
    pub cache_write_1h: f64,
    /// Reasoning output, at the reasoning price, or the output price when the model has none.
    pub reasoning: f64,
    /// The long-context tier that priced the call (its threshold), if one did.
    pub tier_above_tokens: Option<u64>,
}

impl Cost {
    /// The sum of every kind.
    pub fn total(&self) -> f64 {
        self.input
            + self.output
            + self.cache_read
            + self.cache_write_5m
            + self.cache_write_1h
            + self.reasoning
    }
}

impl std::ops::AddAssign for Cost {
    /// Adds two calls' costs kind by kind; the tier is kept only when both agree, since a sum
    /// of calls was not priced by one tier.
    fn add_assign(&mut self, other: Cost) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write_5m += other.cache_write_5m;
        self.cache_write_1h += other.cache_write_1h;
        self.reasoning += other.reasoning;
        if self.tier_above_tokens != other.tier_above_tokens {
            self.tier_above_tokens = None;
        }
    }
}

impl ModelPrice {
    /// The rates that apply to a call with `usage`: the base rates, then each tier whose
    /// threshold the prompt is past, lowest first, each replacing the kinds it names.
    ///
    /// This is LiteLLM's `_get_token_base_cost`: the tier is chosen by the whole prompt
    /// ([`Usage::prompt`]) and applies to every token of the call, not only to the tokens past
    /// the threshold. The returned `Option<u64>` is the threshold of the tier that applied.
    pub fn rates_for(&self, usage: &Usage) -> (Rates, Option<u64>) {
        let prompt = usage.prompt();
        let mut rates = self.rates;
        let mut applied = None;
        for tier in &self.tiers {
            if prompt > tier.above_tokens {
                let t = tier.rates;
                rates.input = t.input.or(rates.input);
                rates.output = t.output.or(rates.output);
                rates.cache_read = t.cache_read.or(rates.cache_read);
                rates.cache_write_5m = t.cache_write_5m.or(rates.cache_write_5m);
                rates.cache_write_1h = t.cache_write_1h.or(rates.cache_write_1h);
                applied = Some(tier.above_tokens);
            }
        }
        (rates, applied)
    }

    /// What `usage` costs at this model's prices, in USD, split by kind.
    ///
    /// A kind without its own price falls back as LiteLLM's cost calculator does: cache reads
    /// and 5-minute writes at the input price (a provider that publishes no cache price bills
    /// cached tokens as ordinary input), 1-hour writes at the 5-minute write price, reasoning at
    /// the output price. `docs/cost.md` lists where ccusage differs.
    pub fn cost(&self, usage: &Usage) -> Cost {
        let (rates, tier) = self.rates_for(usage);
        let input = rates.input.unwrap_or(0.0);
        let output = rates.output.unwrap_or(0.0);
        let cache_read = rates.cache_read.unwrap_or(input);
        let cache_write_5m = rates.cache_write_5m.unwrap_or(input);
        let cache_write_1h = rates.cache_write_1h.unwrap_or(cache_write_5m);
        let reasoning = rates.reasoning.unwrap_or(output);
        // Reasoning is part of `output`; a count that says otherwise is clamped, not doubled.
        let reasoning_tokens = usage.reasoning.min(usage.output);
        let text_tokens = usage.output - reasoning_tokens;
        Cost {
            input: usage.input as f64 * input,
            output: text_tokens as f64 * output,
            cache_read: usage.cache_read as f64 * cache_read,
            cache_write_5m: usage.cache_write_5m as f64 * cache_write_5m,
            cache_write_1h: usage.cache_write_1h as f64 * cache_write_1h,
            reasoning: reasoning_tokens as f64 * reasoning,
            tier_above_tokens: tier,
        }
    }
}
