//! `CucaPlugin`: the hooks a client runs around every model call, and the stream type a turn yields.

use std::pin::Pin;

use async_trait::async_trait;
use futures_core::Stream;

use crate::error::PluginError;
use crate::message::{MessageContentBlock, UnifiedRequest, UnifiedResponse};

/// The stream of blocks one turn yields: live from a provider, or replayed from a recording.
pub type AgentResponseStream =
    Pin<Box<dyn Stream<Item = Result<MessageContentBlock, PluginError>> + Send + 'static>>;

/// Hooks a client runs around every model call, in registration order.
///
/// Every hook has a no-op default, so a plugin overrides only what it needs. A request is
/// seen as earlier `on_request` hooks left it: a redaction plugin registered first scrubs
/// what a session log registered after it stores.
#[async_trait]
pub trait CucaPlugin: Send + Sync {
    /// A short name for logs and errors.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }

    /// Sees (and may change) the request before it is sent. An error aborts the call.
    async fn on_request(&self, request: &mut UnifiedRequest) -> Result<(), PluginError> {
        let _ = request;
        Ok(())
    }

    /// Sees every streamed block, in order, before the caller does. An error aborts the call.
    async fn on_stream_chunk(&self, block: &MessageContentBlock) -> Result<(), PluginError> {
        let _ = block;
        Ok(())
    }

    /// Sees the aggregated response after the stream ended. A client logs an error here
    /// and does not abort the turn.
    async fn on_response_complete(&self, response: &UnifiedResponse) -> Result<(), PluginError> {
        let _ = response;
        Ok(())
    }

    /// Sees a call that failed, with the request as it was sent. Errors here are logged only.
    async fn on_error(
        &self,
        request: &UnifiedRequest,
        error: &PluginError,
    ) -> Result<(), PluginError> {
        let _ = (request, error);
        Ok(())
    }

    /// Runs a tool locally, returning its [`MessageContentBlock::ToolResult`] when this
    /// plugin knows the tool, `None` when it does not.
    async fn execute_local_tool(
        &self,
        call: &MessageContentBlock,
    ) -> Result<Option<MessageContentBlock>, PluginError> {
        let _ = call;
        Ok(None)
    }
}
