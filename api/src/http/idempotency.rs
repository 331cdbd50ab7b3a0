//! The `Idempotency-Key` layer of the HTTP edge. Rules and storage live in
//! `domain::idempotency`; this module reads the header, replays stored
//! responses and runs a write so that its effects and its stored response
//! commit in one transaction.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use domain::auth::Principal;
use domain::idempotency::{self, Claim, IdempotencyKey, NewRequest, StoredResponse, Subject};
use domain::precondition::IfMatch;
use domain::sealed::{self, Keyring, Place};
use domain::store::Work;
use futures::future::LocalBoxFuture;
use sea_orm::DatabaseTransaction;
use serde::Serialize;

use crate::http::error::{ApiError, PROBLEM_JSON};
use crate::http::state::AppState;
use crate::wire::about::About;
use crate::wire::versioned::Versioned;

pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRule {
    Optional,
    Required,
}

/// What a write handler answers; storable for replay.
#[derive(Debug, Clone)]
pub struct Reply {
    status: StatusCode,
    location: Option<String>,
    etag: Option<String>,
    body: String,
    /// The body reveals a secret: its copy kept for replay is sealed.
    reveals_secret: bool,
    /// Whom the body is about: recorded with a stored copy.
    subjects: Vec<Subject>,
}

impl Reply {
    pub fn new(status: StatusCode, body: &(impl Serialize + About)) -> Result<Self, ApiError> {
        let subjects = body.subjects();
        let body = serde_json::to_string(body).map_err(ApiError::internal)?;
        Ok(Self {
            status,
            location: None,
            etag: None,
            body,
            reveals_secret: false,
            subjects,
        })
    }

    /// A versioned record with its `ETag`.
    pub fn tagged(
        status: StatusCode,
        body: &(impl Serialize + Versioned + About),
    ) -> Result<Self, ApiError> {
        Ok(Self::new(status, body)?.etag(etag(body.version())))
    }

    pub fn location(mut self, location: String) -> Self {
        self.location = Some(location);
        self
    }

    pub fn etag(mut self, etag: String) -> Self {
        self.etag = Some(etag);
        self
    }

    /// Marks a body that shows a secret once (a new subscription's): the
    /// response stored for replay is sealed, so the idempotency table never
    /// holds the secret readable, and a replay still answers the same.
    pub fn reveals_secret(mut self) -> Self {
        self.reveals_secret = true;
        self
    }

    /// What is stored for replay under `place`.
    fn for_replay(&self, keys: &Keyring, place: &Place) -> Result<StoredResponse, ApiError> {
        let mut stored = self.stored();
        if self.reveals_secret {
            stored.body = keys
                .seal(&stored.body, place)
                .map_err(domain::Error::from)?;
        }
        Ok(stored)
    }

    fn stored(&self) -> StoredResponse {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        headers.extend(self.location.clone().map(|l| ("location".to_owned(), l)));
        headers.extend(self.etag.clone().map(|e| ("etag".to_owned(), e)));
        StoredResponse {
            status: self.status.as_u16(),
            headers,
            body: self.body.clone(),
        }
    }

    pub fn into_response(self, replayed: Option<bool>) -> HttpResponse {
        respond(&self.stored(), replayed)
    }
}

/// The `ETag` of a record at `version`: a strong tag, `"3"`.
pub fn etag(version: i64) -> String {
    format!("\"{version}\"")
}

/// `200` with a versioned record and its `ETag`, for a read.
pub fn ok_tagged(body: &(impl Serialize + Versioned)) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::ETAG, etag(body.version())))
        .json(body)
}

fn respond(stored: &StoredResponse, replayed: Option<bool>) -> HttpResponse {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = HttpResponse::build(status);
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::from_str(value),
        ) {
            response.insert_header((name, value));
        }
    }
    if let Some(replayed) = replayed {
        response.insert_header((IDEMPOTENT_REPLAYED, if replayed { "true" } else { "false" }));
    }
    response.body(stored.body.clone())
}

/// Outcomes of executing the request: stored and replayed like a success.
/// Everything else (validation, preconditions, 5xx…) releases the key so the
/// client may correct the request and retry it.
fn is_storable(err: &ApiError) -> bool {
    matches!(
        err,
        ApiError::NotFound(_)
            | ApiError::Conflict(_)
            | ApiError::IllegalTransition { .. }
            | ApiError::IllegalStageMove { .. }
            | ApiError::AlreadyConverted { .. }
            | ApiError::LeadMerged { .. }
    )
}

/// Whether the request carries an `Idempotency-Key` header at all.
pub fn has_key(req: &HttpRequest) -> bool {
    req.headers().contains_key(&IDEMPOTENCY_KEY)
}

fn parse_key(req: &HttpRequest) -> Result<Option<IdempotencyKey>, ApiError> {
    match req.headers().get(&IDEMPOTENCY_KEY) {
        None => Ok(None),
        Some(value) => {
            let value = value
                .to_str()
                .map_err(|_| ApiError::IdempotencyKeyInvalid("must be ASCII"))?;
            IdempotencyKey::parse(value)
                .map(Some)
                .map_err(ApiError::IdempotencyKeyInvalid)
        }
    }
}

/// Runs `work` in a write transaction, under the request's Idempotency-Key
/// when it has one. The one commit point of the API's writes: once it
/// committed, the workers are told that leads or outbox events may wait
/// (the transaction notes it; on SQLite the commit itself told them).
pub async fn run<F>(
    state: &AppState,
    caller: &Principal,
    req: &HttpRequest,
    body: &[u8],
    rule: KeyRule,
    work: F,
) -> Result<HttpResponse, ApiError>
where
    F: for<'t> FnOnce(&'t DatabaseTransaction) -> LocalBoxFuture<'t, Result<Reply, ApiError>>,
{
    let Some(key) = parse_key(req)? else {
        if rule == KeyRule::Required {
            return Err(ApiError::IdempotencyKeyMissing);
        }
        let txn = state.db.begin_write().await?;
        let reply = work(&txn).await?;
        txn.enqueued(Work::Leads);
        txn.commit().await?;
        return Ok(reply.into_response(None));
    };

    let method = req.method().as_str();
    let target = idempotency::canonical_target(req.path(), req.query_string());
    let fingerprint = idempotency::fingerprint(method, &target, body);
    let request = NewRequest {
        principal_id: caller.id,
        key: &key,
        fingerprint: &fingerprint,
        method,
        path: &target,
    };
    let claim = idempotency::claim(&state.db, &state.idempotency, &request).await?;
    let replay_place = Place::idempotent_response(caller.id, key.as_str());
    let result = match &claim {
        Claim::Acquired(_) => "executed",
        Claim::Replay(_) => "replayed",
        Claim::InFlight => "in_flight",
        Claim::Mismatch { .. } => "mismatch",
    };
    metrics::counter!("leadpipe_idempotency_requests_total", "result" => result).increment(1);
    let lease = match claim {
        Claim::Acquired(lease) => lease,
        Claim::Replay(mut stored) => {
            if sealed::is_sealed(&stored.body) {
                stored.body = state
                    .http
                    .keyring
                    .open(&stored.body, &replay_place)
                    .map_err(ApiError::internal)?;
            }
            return Ok(respond(&stored, Some(true)));
        }
        Claim::InFlight => return Err(ApiError::IdempotencyKeyInFlight),
        Claim::Mismatch { method, path } => {
            return Err(ApiError::IdempotencyKeyReused { method, path });
        }
    };

    let txn = state.db.begin_write().await?;
    if !lease.fence(&txn).await? {
        txn.rollback().await?;
        return Err(ApiError::IdempotencyKeyInFlight);
    }
    match work(&txn).await {
        Ok(reply) => {
            let stored = match reply.for_replay(&state.http.keyring, &replay_place) {
                Ok(stored) => stored,
                Err(err) => {
                    txn.rollback().await?;
                    if let Err(release_err) = lease.release(&state.db).await {
                        tracing::warn!(error = %release_err, "could not release idempotency key; it frees itself after the lease");
                    }
                    return Err(err);
                }
            };
            if !lease
                .complete(&txn, state.db.hasher(), &stored, &reply.subjects)
                .await?
            {
                // Our lease lapsed and another request took the key over:
                // its execution is the one that counts.
                txn.rollback().await?;
                return Err(ApiError::IdempotencyKeyInFlight);
            }
            txn.enqueued(Work::Leads);
            txn.commit().await?;
            Ok(reply.into_response(Some(false)))
        }
        Err(err) => {
            txn.rollback().await?;
            if is_storable(&err) {
                let stored = StoredResponse {
                    status: err.status_code_u16(),
                    headers: vec![("content-type".to_owned(), PROBLEM_JSON.to_owned())],
                    body: err.problem_body(),
                };
                // A problem body names no person; an earlier conversion's
                // ids link to one.
                let subjects = match &err {
                    ApiError::AlreadyConverted { lead_id, .. } => vec![Subject::Lead(*lead_id)],
                    _ => Vec::new(),
                };
                // The reply and its subjects together, or neither.
                let txn = state.db.begin_write().await?;
                lease
                    .complete(&txn, state.db.hasher(), &stored, &subjects)
                    .await?;
                txn.commit().await?;
                return Ok(respond(&stored, Some(false)));
            }
            if let Err(release_err) = lease.release(&state.db).await {
                tracing::warn!(error = %release_err, "could not release idempotency key; it frees itself after the lease");
            }
            Err(err)
        }
    }
}

/// `If-Match` as the versions a write may apply to: absent or `*` → no
/// check; anything else → the strong version tags it lists (possibly none,
/// which then fails with 412 rather than 422, as RFC 9110 says).
pub fn if_match_version(req: &HttpRequest) -> IfMatch {
    let Some(value) = req.headers().get(header::IF_MATCH) else {
        return IfMatch::Any;
    };
    // A value that is not even visible ASCII names no tag of ours.
    IfMatch::parse(value.to_str().unwrap_or("\"\""))
}
