//! The WebDriver session every browser test drives: Debian's headless Chromium through
//! chromedriver, started on a free loopback port, stopped when the test ends. The viewer's
//! browser tests and `cuca-cli`'s fleet test (`cuca view --store postgres://…`)
//! share it (`#[path]` from there), so there is one driver.
// Helpers outside `#[test]` functions unwrap: a failed step is a failed test.
#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

/// Debian's `chromium`.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's `chromium-driver`.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Kills chromedriver (and with it the browser) when the test ends, pass or fail.
pub struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether the browser is installed: without it a test says so and passes on a developer's
/// machine, and fails under CI (`CI` set), where a missing browser is a broken setup.
pub fn browser_available() -> bool {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER})"
        );
        eprintln!("skipping the browser test: {CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver)");
    }
    present
}

/// chromedriver and a headless Chromium with its profile in `profile`, 1200×900, with no
/// network of its own (no QUIC, sync, updates or background fetches): loopback pages only.
pub async fn start_browser(profile: &Path) -> (Driver, Client) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let driver = Driver(child);
    let url = format!("http://127.0.0.1:{port}");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1200,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    // chromedriver needs a moment to listen: try for up to 20 s, then report its last error.
    let mut last_error = None;
    for _ in 0..200 {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(client) => return (driver, client),
            Err(error) => last_error = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver at {url} never accepted a session: {last_error:?}");
}

/// The text of the first element `css` selects.
pub async fn text_of(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
