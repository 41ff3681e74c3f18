//! The client side of a SASL exchange, without I/O: rsasl's PLAIN and
//! SCRAM-SHA-256/512 mechanisms, and OAUTHBEARER's (RFC 7628) initial
//! response with a token, fed the broker's answers (SaslAuthenticate's
//! `auth_bytes`) and giving the next token to send.

use rsasl::prelude::{Mechname, SASLClient, SASLConfig, Session, SessionError, State};

use crate::security::{Sasl, SaslMechanism};

/// The most PBKDF2 iterations a broker may ask of SCRAM: Kafka's own
/// limit (ScramMechanism's `maxIterations`). More would keep the client's
/// thread busy for as long as the broker likes.
const MAX_SCRAM_ITERATIONS: u32 = 16_384;

/// What to do next in an exchange.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send this token; `last` when the mechanism expects no further
    /// challenge (the broker's answer still says whether it accepted).
    Send { token: Vec<u8>, last: bool },
    /// The exchange is complete on the client's side: the broker proved
    /// itself (SCRAM's server signature checked).
    Done,
}

/// One authentication exchange.
pub(crate) struct Exchange {
    mechanism: SaslMechanism,
    inner: Inner,
    /// The client has sent its final message and checked the server's.
    finished: bool,
}

enum Inner {
    Rsasl(Session),
    /// OAUTHBEARER: the client initial response, until sent.
    OAuthBearer(Option<Vec<u8>>),
}

impl Exchange {
    /// An OAUTHBEARER exchange sending `initial`, the client initial
    /// response with the token (RFC 7628 §3.1). A broker that refuses the
    /// token answers with an error challenge (JSON: the status, the scope
    /// it wants), to which the client answers ^A (§3.2.3), and then fails
    /// the exchange with its message; one that accepts answers nothing.
    pub(crate) fn oauthbearer(initial: Vec<u8>) -> Exchange {
        Exchange {
            mechanism: SaslMechanism::OAuthBearer,
            inner: Inner::OAuthBearer(Some(initial)),
            finished: false,
        }
    }

    /// A new exchange with the credentials of `sasl`.
    pub(crate) fn start(sasl: &Sasl) -> Result<Exchange, String> {
        let config = SASLConfig::with_credentials(
            None,
            sasl.username().to_owned(),
            sasl.password().to_owned(),
        )
        .map_err(|e| format!("cannot set up SASL: {e}"))?;
        let name = Mechname::parse(sasl.mechanism().name().as_bytes())
            .map_err(|e| format!("{}: {e}", sasl.mechanism()))?;
        let session = SASLClient::new(config)
            .start_suggested_iter([name])
            .map_err(|e| format!("cannot start SASL {}: {e}", sasl.mechanism()))?;
        Ok(Exchange {
            mechanism: sasl.mechanism(),
            inner: Inner::Rsasl(session),
            finished: false,
        })
    }

    /// The next step after the broker's `challenge` (`None` to begin; the
    /// mechanisms here all go first).
    pub(crate) fn step(&mut self, challenge: Option<&[u8]>) -> Result<Step, String> {
        if self.finished {
            return Ok(Step::Done);
        }
        let session = match &mut self.inner {
            Inner::Rsasl(session) => session,
            Inner::OAuthBearer(initial) => {
                return Ok(match (initial.take(), challenge) {
                    (Some(token), _) => Step::Send { token, last: false },
                    (None, Some(challenge)) if !challenge.is_empty() => {
                        self.finished = true;
                        Step::Send {
                            token: b"\x01".to_vec(),
                            last: true,
                        }
                    }
                    (None, _) => {
                        self.finished = true;
                        Step::Done
                    }
                })
            }
        };
        if let Some(challenge) = challenge {
            check_iterations(self.mechanism, challenge)?;
        }
        let mut token = Vec::new();
        let state = session
            .step(challenge, &mut token)
            .map_err(|e| explain(self.mechanism, e))?;
        match state {
            State::Running => Ok(Step::Send { token, last: false }),
            State::Finished(_) => {
                self.finished = true;
                if state.has_sent_message() {
                    Ok(Step::Send { token, last: true })
                } else {
                    Ok(Step::Done)
                }
            }
        }
    }
}

/// Refuses a SCRAM server-first message asking for more PBKDF2
/// iterations than Kafka allows.
fn check_iterations(mechanism: SaslMechanism, challenge: &[u8]) -> Result<(), String> {
    if mechanism == SaslMechanism::Plain {
        return Ok(());
    }
    let text = String::from_utf8_lossy(challenge);
    let iterations = text
        .split(',')
        .find_map(|attribute| attribute.strip_prefix("i="));
    if let Some(iterations) = iterations {
        match iterations.parse::<u32>() {
            Ok(count) if count <= MAX_SCRAM_ITERATIONS => {}
            _ => {
                return Err(format!(
                    "the broker asked for {iterations} SCRAM iterations, more than Kafka's \
                     limit of {MAX_SCRAM_ITERATIONS}"
                ))
            }
        }
    }
    Ok(())
}

fn explain(mechanism: SaslMechanism, error: SessionError) -> String {
    match error {
        SessionError::MutualAuthenticationFailed => format!(
            "the broker's {mechanism} server signature does not match the password: the broker \
             does not hold this password for the user (or is not the broker it claims to be)"
        ),
        other => format!("the {mechanism} exchange failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD as BASE64;
    use base64::Engine;
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256, Sha512};

    use super::*;

    /// The server side of SCRAM (RFC 5802 §3), composed in the test from
    /// the RustCrypto primitives, so that rsasl's client is checked against
    /// an implementation of its own. `D` is the hash.
    struct ScramServer {
        salted: Vec<u8>,
        salt: Vec<u8>,
        iterations: u32,
        server_nonce: String,
        sha512: bool,
    }

    fn hmac(sha512: bool, key: &[u8], data: &[u8]) -> Vec<u8> {
        if sha512 {
            let mut mac = Hmac::<Sha512>::new_from_slice(key).unwrap();
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        } else {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }

    fn hash(sha512: bool, data: &[u8]) -> Vec<u8> {
        if sha512 {
            Sha512::digest(data).to_vec()
        } else {
            Sha256::digest(data).to_vec()
        }
    }

    impl ScramServer {
        fn new(sha512: bool, password: &str, salt: &[u8], iterations: u32, nonce: &str) -> Self {
            let mut salted = vec![0; if sha512 { 64 } else { 32 }];
            if sha512 {
                pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), salt, iterations, &mut salted);
            } else {
                pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut salted);
            }
            ScramServer {
                salted,
                salt: salt.to_vec(),
                iterations,
                server_nonce: nonce.to_owned(),
                sha512,
            }
        }

        /// The server-first message for `client_first` (gs2 header `n,,`).
        fn first(&self, client_first: &str) -> (String, String) {
            let bare = client_first
                .strip_prefix("n,,")
                .expect("no channel binding");
            let client_nonce = bare.split(',').find_map(|a| a.strip_prefix("r=")).unwrap();
            let server_first = format!(
                "r={client_nonce}{},s={},i={}",
                self.server_nonce,
                BASE64.encode(&self.salt),
                self.iterations
            );
            (bare.to_owned(), server_first)
        }

        /// Checks `client_final`'s proof; the server-final message.
        fn last(&self, bare: &str, server_first: &str, client_final: &str) -> Result<String, ()> {
            let (without_proof, proof) = client_final.rsplit_once(",p=").unwrap();
            let auth_message = format!("{bare},{server_first},{without_proof}");
            let client_key = hmac(self.sha512, &self.salted, b"Client Key");
            let stored_key = hash(self.sha512, &client_key);
            let signature = hmac(self.sha512, &stored_key, auth_message.as_bytes());
            let proof = BASE64.decode(proof).unwrap();
            let recovered: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
            if hash(self.sha512, &recovered) != stored_key {
                return Err(());
            }
            let server_key = hmac(self.sha512, &self.salted, b"Server Key");
            let server_signature = hmac(self.sha512, &server_key, auth_message.as_bytes());
            Ok(format!("v={}", BASE64.encode(server_signature)))
        }
    }

    /// The test's server reproduces RFC 7677's SCRAM-SHA-256 example
    /// exactly, so that it is a fair judge of the client below.
    #[test]
    fn the_test_server_reproduces_rfc_7677() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let server = ScramServer::new(
            false,
            "pencil",
            &salt,
            4096,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        );
        let (bare, server_first) = server.first("n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(
            server_first,
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let client_final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        assert_eq!(
            server.last(&bare, &server_first, client_final).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let forged = client_final.replace("p=dHzb", "p=dHzc");
        assert!(server.last(&bare, &server_first, &forged).is_err());
    }

    fn sent(step: Step) -> (String, bool) {
        match step {
            Step::Send { token, last } => (String::from_utf8(token).unwrap(), last),
            Step::Done => panic!("nothing to send"),
        }
    }

    fn scram_round_trip(
        mechanism: SaslMechanism,
        server_password: &str,
        forge: bool,
    ) -> Result<(), String> {
        let sha512 = mechanism == SaslMechanism::ScramSha512;
        let sasl = Sasl::new(mechanism, "user", "pencil").unwrap();
        let server = ScramServer::new(
            sha512,
            server_password,
            b"salt-of-the-test",
            4096,
            "srv-nonce",
        );
        let mut exchange = Exchange::start(&sasl)?;
        let (client_first, last) = sent(exchange.step(None)?);
        assert!(!last);
        assert!(client_first.starts_with("n,,n=user,r="), "{client_first}");
        let (bare, server_first) = server.first(&client_first);
        let (client_final, last) = sent(exchange.step(Some(server_first.as_bytes()))?);
        assert!(!last);
        let mut server_final = server
            .last(&bare, &server_first, &client_final)
            .map_err(|()| "the server refused the proof".to_owned())?;
        if forge {
            server_final = format!(
                "v={}",
                BASE64.encode(vec![7u8; if sha512 { 64 } else { 32 }])
            );
        }
        assert_eq!(exchange.step(Some(server_final.as_bytes()))?, Step::Done);
        Ok(())
    }

    #[test]
    fn scram_sha_256_and_512_complete_against_an_independent_server() {
        for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
            scram_round_trip(mechanism, "pencil", false)
                .unwrap_or_else(|e| panic!("{mechanism}: {e}"));
        }
    }

    #[test]
    fn a_wrong_password_fails_the_proof() {
        let refused = scram_round_trip(SaslMechanism::ScramSha256, "not-pencil", false);
        assert_eq!(refused, Err("the server refused the proof".to_owned()));
    }

    #[test]
    fn a_server_signature_that_does_not_match_fails_naming_the_cause() {
        for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512] {
            let error = scram_round_trip(mechanism, "pencil", true).unwrap_err();
            assert!(error.contains("server signature does not match"), "{error}");
        }
    }

    #[test]
    fn plain_sends_one_token_with_the_credentials() {
        let sasl = Sasl::new(SaslMechanism::Plain, "alice", "secret").unwrap();
        let mut exchange = Exchange::start(&sasl).unwrap();
        match exchange.step(None).unwrap() {
            Step::Send { token, last } => {
                assert_eq!(token, b"\0alice\0secret");
                assert!(last);
            }
            Step::Done => panic!("PLAIN sends its credentials"),
        }
        assert_eq!(exchange.step(Some(b"")).unwrap(), Step::Done);
    }

    #[test]
    fn oauthbearer_sends_its_initial_response_and_answers_an_error_challenge_with_ctrl_a() {
        let initial = b"n,,\x01auth=Bearer t\x01\x01".to_vec();
        let mut accepted = Exchange::oauthbearer(initial.clone());
        assert_eq!(
            accepted.step(None).unwrap(),
            Step::Send {
                token: initial.clone(),
                last: false
            }
        );
        assert_eq!(accepted.step(Some(b"")).unwrap(), Step::Done);
        let mut refused = Exchange::oauthbearer(initial);
        refused.step(None).unwrap();
        assert_eq!(
            refused
                .step(Some(br#"{"status":"invalid_token"}"#))
                .unwrap(),
            Step::Send {
                token: b"\x01".to_vec(),
                last: true
            }
        );
    }

    #[test]
    fn too_many_iterations_are_refused_before_any_hashing() {
        let sasl = Sasl::new(SaslMechanism::ScramSha512, "user", "pencil").unwrap();
        let mut exchange = Exchange::start(&sasl).unwrap();
        let (client_first, _) = sent(exchange.step(None).unwrap());
        let nonce = client_first.rsplit_once("r=").unwrap().1;
        let greedy = format!("r={nonce}x,s=c2FsdA==,i=4000000000");
        let error = exchange.step(Some(greedy.as_bytes())).unwrap_err();
        assert!(error.contains("4000000000"), "{error}");
    }
}
