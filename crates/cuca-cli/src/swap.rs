//! `--from POINT --model MODEL` of `cuca run` and `cuca proxy`: fork mode onto another model
//! (`docs/proxy.md`, "Onto another model").

use clap::Args;

use crate::error::CliError;

/// `--from POINT --model MODEL` of `cuca run` and `cuca proxy`: fork mode onto another model.
#[derive(Debug, Args)]
pub(crate) struct SwapArgs {
    /// Fork mode: the first call sent live, by number from 1 (`2`: the first call is
    /// replayed, the second and those after it go live), or a point `{session}:{sequence}`
    /// (the calls recorded up to it are replayed). Needs `--model`.
    #[arg(long, value_name = "POINT", requires = "model")]
    from: Option<String>,
    /// Fork mode: the model the calls from `--from` on are sent to, in each request's own
    /// `model` field; recorded in a fork that begins with a `ModelSwap` record. Needs `--from`.
    #[arg(long, value_name = "MODEL", requires = "from")]
    model: Option<String>,
}

impl SwapArgs {
    /// Puts the swap into `config`; a bad point, or a swap outside fork mode, is a usage error.
    pub(crate) fn apply(&self, config: &mut cuca_proxy::ProxyConfig) -> Result<(), CliError> {
        let (Some(from), Some(model)) = (&self.from, &self.model) else {
            return Ok(());
        };
        let from = from
            .parse()
            .map_err(|error: cuca_proxy::ProxyError| CliError::Usage(error.to_string()))?;
        config.model_swap = Some(cuca_proxy::ModelSwap {
            from,
            model: model.clone(),
        });
        config
            .validate()
            .map_err(|error| CliError::Usage(error.to_string()))
    }
}
