//! Well-formed fakes of every default kind, shared by the tests.

#![allow(dead_code)]

/// One fake secret: the rule that must find it, the text it appears as (with the context its
/// rule needs), and the secret bytes that must not survive.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fake {
    pub(crate) rule: &'static str,
    pub(crate) text: &'static str,
    pub(crate) secret: &'static str,
}

pub(crate) const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA7Zq3Lr9Xw2Nc7Vb1Mk8Jh3Gf6Dd0Ss5Aa2Pp7Oo4Ii9Uu1Yy3T
q7Wm2Xz9Rt4Lp8Nv3Yc6Hb1Kd5Fg0SaQm7vR2xT9kLp4WzN8cYb3HdF6jGs1aEu+/=
-----END RSA PRIVATE KEY-----";

pub(crate) const OPENSSH: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACBxR7tK9mW2zX4pL8nQ3vY6cH1jF5gS0dA2eU8iO7wP4qAAAAJj3Zk9Xq2L
-----END OPENSSH PRIVATE KEY-----";

pub(crate) const FAKES: &[Fake] = &[
    Fake {
        rule: "openai-key",
        text: "sk-proj-Qm7vR2xT9kLp4WzN8cYb3HdF6jGs1aEu_Xw2Nc7Vb1Mk8Jh3Gf6Dd0Ss5",
        secret: "sk-proj-Qm7vR2xT9kLp4WzN8cYb3HdF6jGs1aEu_Xw2Nc7Vb1Mk8Jh3Gf6Dd0Ss5",
    },
    Fake {
        rule: "openai-key",
        text: "sk-Zr4Lq9Xw2Nc7Vb1Mk8Jh3Gf6Dd0Ss5Aa2Pp7Oo4Ii9Uu1Yy3T",
        secret: "sk-Zr4Lq9Xw2Nc7Vb1Mk8Jh3Gf6Dd0Ss5Aa2Pp7Oo4Ii9Uu1Yy3T",
    },
    Fake {
        rule: "anthropic-key",
        text: "sk-ant-api03-Xb8Kq2Wm5Rz9Tn4Lc7Vp1Hs6Jd3Fg0Ay2Ue8Io5Pw7Qm3Zx9Rt4Lp8Nv3Yc6Hb1Kd5Fg0Sa-AA",
        secret: "sk-ant-api03-Xb8Kq2Wm5Rz9Tn4Lc7Vp1Hs6Jd3Fg0Ay2Ue8Io5Pw7Qm3Zx9Rt4Lp8Nv3Yc6Hb1Kd5Fg0Sa-AA",
    },
    Fake {
        rule: "aws-access-key-id",
        text: "AKIAZ7Q3X9M2P5L8N4R6",
        secret: "AKIAZ7Q3X9M2P5L8N4R6",
    },
    Fake {
        rule: "aws-access-key-id",
        text: "ASIAY4T8K2W6Q9Z3M7P1",
        secret: "ASIAY4T8K2W6Q9Z3M7P1",
    },
    Fake {
        rule: "aws-secret-key",
        text: "aws_secret_access_key = Zk9Xq2Lm7Wn4Rt8Yp3Vb6Hc1Jd5Gf0Sa9Ue2Io7Q",
        secret: "Zk9Xq2Lm7Wn4Rt8Yp3Vb6Hc1Jd5Gf0Sa9Ue2Io7Q",
    },
    Fake {
        rule: "aws-secret-key",
        text: "\"SecretAccessKey\": \"Tq4Wm8Zx2Rt6Lp0Nv5Yc9Hb3Kd7Fg1Sa+Ue/Io4P\"",
        secret: "Tq4Wm8Zx2Rt6Lp0Nv5Yc9Hb3Kd7Fg1Sa+Ue/Io4P",
    },
    Fake {
        rule: "github-token",
        text: "ghp_R8mK2xQ9wL4zT7vN3cY6bH1jF5gS0dA2eU8i",
        secret: "ghp_R8mK2xQ9wL4zT7vN3cY6bH1jF5gS0dA2eU8i",
    },
    Fake {
        rule: "github-token",
        text: "gho_Zx7Rt4Lp9Nv3Yc6Hb1Jf5Gs0Dk2Wm8Qa4Ue1Io",
        secret: "gho_Zx7Rt4Lp9Nv3Yc6Hb1Jf5Gs0Dk2Wm8Qa4Ue1Io",
    },
    Fake {
        rule: "github-token",
        text: "ghs_Pw3Qm7Zx9Rt4Lp8Nv2Yc6Hb1Kd5Fg0Sa3Ue7Io",
        secret: "ghs_Pw3Qm7Zx9Rt4Lp8Nv2Yc6Hb1Kd5Fg0Sa3Ue7Io",
    },
    Fake {
        rule: "github-token",
        text: "ghu_Lc7Vp1Hs6Jd3Fg0Ay2Ue8Io5Pw7Qm3Zx9Rt4Lp",
        secret: "ghu_Lc7Vp1Hs6Jd3Fg0Ay2Ue8Io5Pw7Qm3Zx9Rt4Lp",
    },
    Fake {
        rule: "github-token",
        text: "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U",
        secret: "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U",
    },
    Fake {
        rule: "slack-token",
        text: "xoxb-2048193847-5827364019283-Kq8Wm2Zx7Rt4Lp9Nv3Yc6Hb1",
        secret: "xoxb-2048193847-5827364019283-Kq8Wm2Zx7Rt4Lp9Nv3Yc6Hb1",
    },
    Fake {
        rule: "slack-token",
        text: "xoxp-1234567890-0987654321-1122334455-Zq7Wm2Xz9Rt4Lp8Nv3Yc6Hb1Kd5Fg0Sa",
        secret: "xoxp-1234567890-0987654321-1122334455-Zq7Wm2Xz9Rt4Lp8Nv3Yc6Hb1Kd5Fg0Sa",
    },
    Fake {
        rule: "slack-webhook",
        text: "https://hooks.slack.com/services/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",
        secret: "T04ABCD1E/B05FGHI2J/q7Wm2Xz9Rt4Lp8Nv3Yc6Hb1K",
    },
    Fake {
        rule: "stripe-key",
        text: "sk_live_51Hq8Wm2Zx7Rt4Lp9Nv3Yc6Hb1Jf5Gs0Dk",
        secret: "sk_live_51Hq8Wm2Zx7Rt4Lp9Nv3Yc6Hb1Jf5Gs0Dk",
    },
    Fake {
        rule: "stripe-key",
        text: "rk_live_51Kd5Fg0Sa3Ue7IoPw3Qm7Zx9Rt4Lp8Nv",
        secret: "rk_live_51Kd5Fg0Sa3Ue7IoPw3Qm7Zx9Rt4Lp8Nv",
    },
    Fake {
        rule: "jwt",
        text: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        secret: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    },
    Fake {
        rule: "bearer",
        text: "Authorization: Bearer q7Wm2Xz9Rt4Lp8Nv3Yc6Hb1Kd5Fg0Sa.Zx7",
        secret: "q7Wm2Xz9Rt4Lp8Nv3Yc6Hb1Kd5Fg0Sa.Zx7",
    },
    Fake {
        rule: "private-key",
        text: PEM,
        secret: PEM,
    },
    Fake {
        rule: "private-key",
        text: OPENSSH,
        secret: OPENSSH,
    },
    Fake {
        rule: "password-field",
        text: "{\"password\": \"correct-horse-battery-staple-42\"}",
        secret: "correct-horse-battery-staple-42",
    },
    Fake {
        rule: "password-field",
        text: "{\"db_api_key\":\"Lm7Wn4Rt8Yp3Vb6Hc1\"}",
        secret: "Lm7Wn4Rt8Yp3Vb6Hc1",
    },
];

/// Every 8-byte window of `secret` that holds no line break: none may be found in a
/// redacted text (however the text was escaped, these windows read the same).
pub(crate) fn windows(secret: &str) -> Vec<&str> {
    let bytes = secret.as_bytes();
    (0..bytes.len().saturating_sub(7))
        .map(|i| &secret[i..i + 8])
        .filter(|w| !w.contains('\n'))
        .collect()
}

/// Panics, naming the window, if any byte window of `fake`'s secret is in `haystack`.
pub(crate) fn assert_gone(fake: &Fake, haystack: &str, context: &str) {
    for window in windows(fake.secret) {
        assert!(
            !haystack.contains(window),
            "{context}: {:?} of a {} secret survived in {haystack:?}",
            window,
            fake.rule
        );
    }
}
