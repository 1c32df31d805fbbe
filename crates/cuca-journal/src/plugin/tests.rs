//! Unit tests of the plugin's classification and role rules.

use super::*;

fn provider(status: u16, message: &str) -> PluginError {
    PluginError::Provider {
        url: "http://127.0.0.1:9/v1".into(),
        status,
        message: message.into(),
        retry_after_s: None,
    }
}

#[test]
fn errors_are_classed_by_what_the_loop_branches_on() {
    // "Model errors are recorded by class, because the class is what the loop branches on"
    assert_eq!(
        classify(&provider(400, "Image input not supported")),
        (ErrorClass::UnsupportedImage, Some(400))
    );
    assert_eq!(
        classify(&provider(401, "bad key")),
        (ErrorClass::MissingCredential, Some(401))
    );
    assert_eq!(
        classify(&provider(503, "busy")),
        (ErrorClass::RetryExhaustion, Some(503))
    );
    assert_eq!(
        classify(&provider(400, "bad request")),
        (ErrorClass::FatalStatus, Some(400))
    );
    assert_eq!(
        classify(&PluginError::Decode {
            url: "u".into(),
            message: "not json".into()
        }),
        (ErrorClass::UnparseableResponse, None)
    );
    assert_eq!(
        classify(&PluginError::Timeout {
            url: "u".into(),
            phase: "data".into(),
            after_ms: 10
        }),
        (ErrorClass::RetryExhaustion, None)
    );
    assert_eq!(
        classify(&PluginError::validation(
            "ProviderEndpoint",
            "no API key (credential) configured"
        )),
        (ErrorClass::MissingCredential, None)
    );
    assert_eq!(
        classify(&PluginError::Plugin {
            plugin: "loop-guard".into(),
            message: "loop detected on every attempt".into()
        }),
        (ErrorClass::LoopAbandoned, None)
    );
}

#[test]
fn the_compaction_tag_selects_the_summarizer_role() {
    let mut request = UnifiedRequest::default();
    assert_eq!(role_of(&request), RequestRole::AgentTurn);
    request.metadata.tag = Some(COMPACTION_TAG.into());
    assert_eq!(role_of(&request), RequestRole::CompactionSummarizer);
}

#[tokio::test]
async fn a_stopped_recorder_leaves_nothing_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::start(crate::RecorderConfig::new(dir.path(), "s").unwrap()).unwrap();
    recorder.finish();
    let plugin = JournalPlugin::new(recorder);
    let mut request = UnifiedRequest::new(vec![cuca_events::Message::user("hi")]);
    assert!(plugin.on_request(&mut request).await.is_ok());
    assert_eq!(plugin.in_flight(), 0);
}
