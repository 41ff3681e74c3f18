//! Java's `sasl.jaas.config`, read as Kafka's `JaasConfig` reads it (one
//! login module, its control flag, its options; quotes, escapes and
//! comments as Java's `StreamTokenizer` takes them), and its login module's
//! options translated to librdkafka's SASL keys: PlainLoginModule and
//! ScramLoginModule to `sasl.username`/`sasl.password`,
//! OAuthBearerLoginModule to the unsecured JWT or OIDC client credentials,
//! Krb5LoginModule to `sasl.kerberos.*`.

use std::collections::BTreeMap;

use super::{put, written, Settings, NOT_SHOWN};
use crate::kafka::config::client::ClientPrefix;
use crate::kafka::config::ConfigError;

pub(super) const SASL_JAAS_CONFIG: &str = "sasl.jaas.config";

/// One login module entry of `sasl.jaas.config`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JaasEntry {
    login_module: String,
    options: BTreeMap<String, String>,
}

/// A token of JAAS text, as Kafka's `JaasConfig` reads it with Java's
/// `StreamTokenizer`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A word, or a quoted string (its quotes gone, its escapes applied).
    Text(String),
    Equals,
    Semicolon,
}

/// Splits JAAS text into tokens by the rules of Kafka's `JaasConfig`:
/// whitespace is every character up to the space; `;` and `=` stand
/// alone; `"` and `'` quote (with Java's escapes: `\n`, `\t`, octal,
/// `\\`, `\"`; a line break ends the string); `/` starts a comment (`//`
/// and a lone `/` to the end of the line, `/* ... */`); any other
/// character from `!` on is part of a word.
fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c <= ' ' => {}
            ';' => tokens.push(Token::Semicolon),
            '=' => tokens.push(Token::Equals),
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = '\0';
                loop {
                    match chars.next() {
                        Some('/') if last == '*' => break,
                        Some(c) => last = c,
                        None => return Err("a /* comment is not closed with */".to_string()),
                    }
                }
            }
            '/' => while chars.next_if(|c| *c != '\n' && *c != '\r').is_some() {},
            '"' | '\'' => {
                let quote = c;
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some(c) if c == quote => break,
                        Some('\n' | '\r') | None => {
                            return Err(format!(
                                "a value opened with {quote} is not closed on its line"
                            ))
                        }
                        Some('\\') => value.push(escape(&mut chars)?),
                        Some(c) => value.push(c),
                    }
                }
                tokens.push(Token::Text(value));
            }
            c if is_word_char(c) => {
                let mut word = c.to_string();
                while let Some(c) = chars.next_if(|c| is_word_char(*c)) {
                    word.push(c);
                }
                tokens.push(Token::Text(word));
            }
            c => {
                return Err(format!(
                    "the character {c:?} cannot stand outside quotes: quote the value"
                ))
            }
        }
    }
    Ok(tokens)
}

/// A word character of Kafka's tokenizer (`wordChars(32, 128)` and
/// `wordChars(160, 255)`, less the special ones; above 255 every
/// character).
fn is_word_char(c: char) -> bool {
    let code = u32::from(c);
    ((33..=128).contains(&code) || code >= 160) && !matches!(c, ';' | '=' | '"' | '\'' | '/')
}

/// The character a backslash escape in a quoted value stands for, as
/// Java's `StreamTokenizer` reads it.
fn escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<char, String> {
    let Some(c) = chars.next() else {
        return Err("a value ends in a lone backslash".to_string());
    };
    Ok(match c {
        'a' => '\u{7}',
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'v' => '\u{b}',
        '0'..='7' => {
            // Up to three octal digits, the first at most 3 for three.
            let mut code = c.to_digit(8).unwrap_or(0);
            let most = if c <= '3' { 2 } else { 1 };
            for _ in 0..most {
                match chars.next_if(|d| d.is_digit(8)) {
                    Some(d) => code = code * 8 + d.to_digit(8).unwrap_or(0),
                    None => break,
                }
            }
            char::from_u32(code).unwrap_or('\0')
        }
        other => other,
    })
}

/// Checks JAAS text on its own: its syntax, and a login module that
/// translates.
pub(super) fn check(text: &str) -> Result<(), String> {
    let entry = parse_jaas(text)?;
    LoginModule::of(&entry.login_module)?;
    Ok(())
}

/// The one login module entry of JAAS text: `<LoginModule> <flag>
/// (<option>=<value>)*;`, the flag one of required, requisite, sufficient,
/// optional (any case). A client takes exactly one entry, as Kafka's.
fn parse_jaas(text: &str) -> Result<JaasEntry, String> {
    const FORM: &str = "the form is <LoginModule> required username=\"...\" password=\"...\";";
    let tokens = tokens(text)?;
    let mut entries = Vec::new();
    let mut rest = tokens.as_slice();
    while let Some((first, after)) = rest.split_first() {
        let Token::Text(login_module) = first else {
            return Err(format!("a login module class must come first; {FORM}"));
        };
        let flag = match after.first() {
            Some(Token::Text(flag)) => flag,
            _ => return Err(format!("{login_module} has no control flag; {FORM}")),
        };
        if !["required", "requisite", "sufficient", "optional"]
            .iter()
            .any(|f| flag.eq_ignore_ascii_case(f))
        {
            return Err(format!(
                "{flag:?} is not a control flag (required, requisite, sufficient, optional) \
                 after {login_module}; {FORM}"
            ));
        }
        rest = &after[1..];
        let mut options = BTreeMap::new();
        loop {
            match rest {
                [Token::Semicolon, tail @ ..] => {
                    rest = tail;
                    break;
                }
                [Token::Text(key), Token::Equals, Token::Text(value), tail @ ..] => {
                    options.insert(key.clone(), value.clone());
                    rest = tail;
                }
                [Token::Text(key), ..] => {
                    return Err(format!("the option {key} has no value; {FORM}"))
                }
                [Token::Equals, ..] => return Err(format!("an = has no option name; {FORM}")),
                [] => {
                    return Err(format!(
                        "the entry of {login_module} is not ended by a semicolon; {FORM}"
                    ))
                }
            }
        }
        entries.push(JaasEntry {
            login_module: login_module.clone(),
            options,
        });
    }
    match entries.len() {
        1 => Ok(entries.remove(0)),
        0 => Err(format!("no login module is given; {FORM}")),
        n => Err(format!(
            "{n} login modules are given where a client takes one, as Kafka's does"
        )),
    }
}

/// The login modules of Kafka's clients that translate to librdkafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoginModule {
    Plain,
    Scram,
    OAuthBearer,
    Kerberos,
}

impl LoginModule {
    fn of(class: &str) -> Result<LoginModule, String> {
        Ok(match class {
            "org.apache.kafka.common.security.plain.PlainLoginModule" => LoginModule::Plain,
            "org.apache.kafka.common.security.scram.ScramLoginModule" => LoginModule::Scram,
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
            | "org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerLoginModule" => {
                LoginModule::OAuthBearer
            }
            "com.sun.security.auth.module.Krb5LoginModule" => LoginModule::Kerberos,
            other => {
                return Err(format!(
                    "the login module {other} is not one kstreams translates for librdkafka: \
                     use org.apache.kafka.common.security.plain.PlainLoginModule, \
                     org.apache.kafka.common.security.scram.ScramLoginModule, \
                     org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule or \
                     com.sun.security.auth.module.Krb5LoginModule, or librdkafka's \
                     sasl.username and sasl.password"
                ))
            }
        })
    }

    /// The `sasl.mechanism` values this module logs in for.
    fn mechanisms(self) -> &'static [&'static str] {
        match self {
            LoginModule::Plain => &["PLAIN"],
            LoginModule::Scram => &["SCRAM-SHA-256", "SCRAM-SHA-512"],
            LoginModule::OAuthBearer => &["OAUTHBEARER"],
            LoginModule::Kerberos => &["GSSAPI"],
        }
    }
}

pub(super) fn translate_jaas(settings: &mut Settings) -> Result<(), ConfigError> {
    let Some((prefix, text)) = settings.remove(SASL_JAAS_CONFIG) else {
        return Ok(());
    };
    let source = written(prefix, SASL_JAAS_CONFIG);
    let sasl = settings
        .get("security.protocol")
        .is_some_and(|(_, p)| p.trim().to_ascii_lowercase().starts_with("sasl_"));
    if !sasl {
        // As in Java: without a SASL security.protocol nothing logs in.
        log::debug!("{source} is not used: security.protocol is not SASL_PLAINTEXT or SASL_SSL");
        return Ok(());
    }
    let invalid = |expected: String| ConfigError::Invalid {
        key: source.clone(),
        value: NOT_SHOWN.to_string(),
        expected,
    };
    let entry = parse_jaas(&text).map_err(invalid)?;
    let module = LoginModule::of(&entry.login_module).map_err(invalid)?;
    let mechanism = ["sasl.mechanism", "sasl.mechanisms"]
        .iter()
        .find_map(|key| {
            settings
                .get(*key)
                .map(|(p, m)| (written(*p, key), m.trim()))
        });
    let (mechanism_key, mechanism) = match mechanism {
        Some((key, value)) => (key, value.to_ascii_uppercase()),
        // Kafka's and librdkafka's default.
        None => ("sasl.mechanism (unset)".to_string(), "GSSAPI".to_string()),
    };
    if !module.mechanisms().contains(&mechanism.as_str()) {
        return Err(ConfigError::Conflict {
            key: source.clone(),
            with: format!("{mechanism_key}={mechanism}"),
            hint: format!(
                "{} logs in for {}: set sasl.mechanism to it (Kafka's default is GSSAPI), or \
                 the login module of {mechanism}",
                entry.login_module,
                module.mechanisms().join(" or ")
            ),
        });
    }
    let option = |name: &str| entry.options.get(name).cloned();
    match module {
        LoginModule::Plain | LoginModule::Scram => {
            if module == LoginModule::Scram
                && option("tokenauth").is_some_and(|t| t.eq_ignore_ascii_case("true"))
            {
                return Err(invalid(
                    "tokenauth=true (a delegation token) is not supported by librdkafka"
                        .to_string(),
                ));
            }
            let (Some(username), Some(password)) = (option("username"), option("password")) else {
                return Err(invalid(format!(
                    "{} needs username=\"...\" and password=\"...\"",
                    entry.login_module
                )));
            };
            put(settings, prefix, &source, "sasl.username", username)?;
            put(settings, prefix, &source, "sasl.password", password)?;
        }
        LoginModule::OAuthBearer => oauthbearer(settings, prefix, &source, &entry.options)?,
        LoginModule::Kerberos => {
            for (java, librdkafka) in [
                ("keyTab", "sasl.kerberos.keytab"),
                ("principal", "sasl.kerberos.principal"),
            ] {
                if let Some(value) = option(java) {
                    put(settings, prefix, &source, librdkafka, value)?;
                }
            }
        }
    }
    Ok(())
}

/// OAuthBearerLoginModule's options: the unsecured JWT's
/// (`unsecuredLogin*`, for test brokers) to librdkafka's
/// `sasl.oauthbearer.config` with its unsecured JWT handler, or KIP-768's
/// OIDC client credentials (`clientId`, `clientSecret`, `scope`,
/// `extension_*`, with `sasl.oauthbearer.token.endpoint.url`) to
/// `sasl.oauthbearer.method=oidc`.
fn oauthbearer(
    settings: &mut Settings,
    prefix: ClientPrefix,
    source: &str,
    options: &BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    let invalid = |expected: String| ConfigError::Invalid {
        key: source.to_string(),
        value: NOT_SHOWN.to_string(),
        expected,
    };
    if options.keys().any(|k| k.starts_with("unsecuredLogin")) {
        let principal_claim = options
            .get("unsecuredLoginPrincipalClaimName")
            .map_or("sub", String::as_str);
        let scope_claim = options
            .get("unsecuredLoginScopeClaimName")
            .map_or("scope", String::as_str);
        let mut config = vec![format!("principalClaimName={principal_claim}")];
        let mut principal = false;
        for (key, value) in options {
            if value.chars().any(char::is_whitespace) {
                return Err(invalid(format!(
                    "the value of {key} has white space, which librdkafka's \
                     sasl.oauthbearer.config cannot carry"
                )));
            }
            if let Some(claim) = key.strip_prefix("unsecuredLoginStringClaim_") {
                if claim == principal_claim {
                    config.push(format!("principal={value}"));
                    principal = true;
                    continue;
                }
            } else if let Some(claim) = key.strip_prefix("unsecuredLoginListClaim_") {
                if claim == scope_claim {
                    // Java's list: its first character separates the items.
                    let mut chars = value.chars();
                    let separator = chars.next().unwrap_or(',');
                    let items: Vec<&str> = chars
                        .as_str()
                        .split(separator)
                        .filter(|s| !s.is_empty())
                        .collect();
                    config.push(format!("scopeClaimName={scope_claim}"));
                    config.push(format!("scope={}", items.join(",")));
                    continue;
                }
            } else if let Some(name) = key.strip_prefix("unsecuredLoginExtension_") {
                config.push(format!("extension_{name}={value}"));
                continue;
            } else if key == "unsecuredLoginLifetimeSeconds" {
                config.push(format!("lifeSeconds={value}"));
                continue;
            } else if key == "unsecuredLoginPrincipalClaimName"
                || key == "unsecuredLoginScopeClaimName"
            {
                continue;
            }
            return Err(invalid(format!(
                "the option {key} has no counterpart in librdkafka's unsecured JWT (it takes \
                 the principal, scope and lifetime claims and extensions)"
            )));
        }
        if !principal {
            return Err(invalid(format!(
                "an unsecured JWT needs its principal: unsecuredLoginStringClaim_{principal_claim}"
            )));
        }
        put(
            settings,
            prefix,
            source,
            "sasl.oauthbearer.config",
            config.join(" "),
        )?;
        put(
            settings,
            prefix,
            source,
            "enable.sasl.oauthbearer.unsecure.jwt",
            "true".to_string(),
        )?;
        return Ok(());
    }
    let (Some(client_id), Some(client_secret)) =
        (options.get("clientId"), options.get("clientSecret"))
    else {
        return Err(invalid(
            "OAuthBearerLoginModule needs clientId and clientSecret (OIDC client credentials, \
             with sasl.oauthbearer.token.endpoint.url) or unsecuredLoginStringClaim_sub (an \
             unsecured JWT, for test brokers)"
                .to_string(),
        ));
    };
    if !settings.contains_key("sasl.oauthbearer.token.endpoint.url") {
        return Err(ConfigError::Missing {
            key: "sasl.oauthbearer.token.endpoint.url",
            hint: "sasl.jaas.config's OAuthBearerLoginModule with clientId and clientSecret \
                   gets its tokens there (OIDC client credentials)",
        });
    }
    put(
        settings,
        prefix,
        source,
        "sasl.oauthbearer.method",
        "oidc".to_string(),
    )?;
    put(
        settings,
        prefix,
        source,
        "sasl.oauthbearer.client.id",
        client_id.clone(),
    )?;
    put(
        settings,
        prefix,
        source,
        "sasl.oauthbearer.client.secret",
        client_secret.clone(),
    )?;
    if let Some(scope) = options.get("scope") {
        put(
            settings,
            prefix,
            source,
            "sasl.oauthbearer.scope",
            scope.clone(),
        )?;
    }
    let extensions: Vec<String> = options
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("extension_")
                .map(|name| format!("{name}={v}"))
        })
        .collect();
    if !extensions.is_empty() {
        put(
            settings,
            prefix,
            source,
            "sasl.oauthbearer.extensions",
            extensions.join(","),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{translated, OAUTH, PLAIN, SCRAM};
    use super::*;

    #[test]
    fn jaas_values_are_read_as_kafka_reads_them() {
        let entry = parse_jaas(&format!(
            "{SCRAM} required\n  username=\"al ice\" password='p\\\"a\\\\ss\\tw=;rd' // a comment\n\
             /* another\n one */ plain=word_1.x-y@z ;"
        ))
        .unwrap();
        assert_eq!(entry.login_module, SCRAM);
        assert_eq!(entry.options["username"], "al ice");
        assert_eq!(entry.options["password"], "p\"a\\ss\tw=;rd");
        assert_eq!(entry.options["plain"], "word_1.x-y@z");
        // Octal escapes and any case of the flag.
        let entry = parse_jaas(&format!("{PLAIN} OPTIONAL a=\"\\101\\61x\";")).unwrap();
        assert_eq!(entry.options["a"], "A1x");
        // No options at all.
        assert!(parse_jaas(&format!("{SCRAM} required;"))
            .unwrap()
            .options
            .is_empty());
    }

    #[test]
    fn jaas_mistakes_are_named() {
        let error = |text: String| parse_jaas(&text).unwrap_err();
        let missing_flag = error(format!("{SCRAM} username=\"u\" password=\"p\";"));
        assert!(
            missing_flag.contains("\"username\" is not a control flag"),
            "{missing_flag}"
        );
        assert!(missing_flag.contains("required"), "{missing_flag}");
        let no_semicolon = error(format!("{SCRAM} required username=\"u\""));
        assert!(no_semicolon.contains("semicolon"), "{no_semicolon}");
        let no_value = error(format!("{SCRAM} required username=;"));
        assert!(no_value.contains("username has no value"), "{no_value}");
        let open_quote = error(format!("{SCRAM} required username=\"u;"));
        assert!(open_quote.contains("not closed"), "{open_quote}");
        assert!(error(String::new()).contains("no login module"));
        let two = error(format!("{SCRAM} required; {PLAIN} required;"));
        assert!(two.contains("2 login modules"), "{two}");
        assert!(error(format!("{SCRAM} required a=/x;")).contains("no value"));
        let unknown = LoginModule::of("com.example.MyLoginModule").unwrap_err();
        assert!(unknown.contains("com.example.MyLoginModule"), "{unknown}");
        assert!(unknown.contains("ScramLoginModule"), "{unknown}");
    }

    #[test]
    fn a_scram_or_plain_login_becomes_librdkafka_username_and_password() {
        let got = translated(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                SASL_JAAS_CONFIG,
                &format!("{SCRAM} required username=\"app\" password=\"s3cr=t\";"),
            ),
        ])
        .unwrap();
        assert_eq!(got["sasl.username"], "app");
        assert_eq!(got["sasl.password"], "s3cr=t");
        assert!(!got.contains_key(SASL_JAAS_CONFIG));
        // The module must suit the mechanism, whose default is GSSAPI.
        for mechanism in [Some("PLAIN"), None] {
            let mut pairs = vec![
                ("security.protocol", "SASL_PLAINTEXT"),
                (SASL_JAAS_CONFIG, "x"),
            ];
            let jaas = format!("{SCRAM} required username=\"a\" password=\"b\";");
            pairs[1].1 = &jaas;
            if let Some(m) = mechanism {
                pairs.push(("sasl.mechanisms", m));
            }
            let text = translated(&pairs).unwrap_err().to_string();
            assert!(text.contains("SCRAM-SHA-256 or SCRAM-SHA-512"), "{text}");
            assert!(!text.contains("\"b\""), "{text}");
        }
        // A librdkafka key saying otherwise is a conflict, the same value is not.
        let jaas = format!("{PLAIN} required username=\"a\" password=\"b\";");
        let base = [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            (SASL_JAAS_CONFIG, jaas.as_str()),
        ];
        let mut other = base.to_vec();
        other.push(("sasl.username", "someone"));
        let text = translated(&other).unwrap_err().to_string();
        assert!(
            text.starts_with("config sasl.username cannot be used with sasl.jaas.config"),
            "{text}"
        );
        let mut same = base.to_vec();
        same.push(("sasl.username", "a"));
        assert!(translated(&same).is_ok());
        // Without a SASL protocol it is not used, as in Java.
        let got = translated(&[(SASL_JAAS_CONFIG, jaas.as_str())]).unwrap();
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn an_oauthbearer_login_becomes_librdkafka_unsecured_jwt_or_oidc() {
        let unsecured = format!(
            "{OAUTH} required unsecuredLoginStringClaim_sub=\"alice\" \
             unsecuredLoginListClaim_scope=\"|read|write\" unsecuredLoginExtension_trace=\"7\" \
             unsecuredLoginLifetimeSeconds=\"600\";"
        );
        let got = translated(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            (SASL_JAAS_CONFIG, &unsecured),
        ])
        .unwrap();
        assert_eq!(
            got["sasl.oauthbearer.config"],
            "principalClaimName=sub extension_trace=7 lifeSeconds=600 \
             scopeClaimName=scope scope=read,write principal=alice"
        );
        assert_eq!(got["enable.sasl.oauthbearer.unsecure.jwt"], "true");

        let oidc = format!(
            "{OAUTH} required clientId=\"app\" clientSecret=\"shh\" scope=\"kafka\" \
             extension_logicalCluster=\"lkc-1\";"
        );
        let mut pairs = vec![
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            (SASL_JAAS_CONFIG, oidc.as_str()),
        ];
        let missing = translated(&pairs).unwrap_err().to_string();
        assert!(
            missing.contains("sasl.oauthbearer.token.endpoint.url"),
            "{missing}"
        );
        pairs.push(("sasl.oauthbearer.token.endpoint.url", "https://idp/token"));
        let got = translated(&pairs).unwrap();
        assert_eq!(got["sasl.oauthbearer.method"], "oidc");
        assert_eq!(got["sasl.oauthbearer.client.id"], "app");
        assert_eq!(got["sasl.oauthbearer.client.secret"], "shh");
        assert_eq!(got["sasl.oauthbearer.scope"], "kafka");
        assert_eq!(got["sasl.oauthbearer.extensions"], "logicalCluster=lkc-1");
    }
}
