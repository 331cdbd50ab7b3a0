//! The one shape of a write handler: the body read and parsed after the
//! caller's roles are checked (so an unauthorised caller learns nothing
//! about what it sent), `If-Match` read, and the domain call run in a write
//! transaction under the request's `Idempotency-Key`.
//!
//! ```ignore
//! async fn patch(caller: Caller<SalesUp>, id: web::Path<PathId>, write: Write<PatchIn>)
//!     -> Result<HttpResponse, ApiError> {
//!     let (id, author) = (id.into_inner(), caller.actor());
//!     write.run(&caller, KeyRule::Optional, move |txn, input, if_match| Box::pin(async move {
//!         let company = company::update(txn, id, input.into(), &if_match, &author).await?;
//!         Reply::tagged(StatusCode::OK, &CompanyOut::from(company))
//!     })).await
//! }
//! ```

use std::marker::PhantomData;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, HttpResponse, web};
use domain::auth::Principal;
use domain::precondition::IfMatch;
use futures::future::LocalBoxFuture;
use sea_orm::DatabaseTransaction;
use serde::de::DeserializeOwned;

use crate::http::body::{is_json, media_type, parse_json, read_bytes, read_json_bytes};
use crate::http::error::ApiError;
use crate::http::idempotency::{self, KeyRule, Reply, if_match_version};
use crate::http::state::AppState;

/// A JSON write, not yet read: taking it as an extractor reads nothing, so
/// the extractors before it (the caller's roles) decide first.
pub struct Write<T> {
    req: HttpRequest,
    payload: web::Payload,
    input: PhantomData<T>,
}

impl<T> FromRequest for Write<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        // Takes the body stream; reads nothing.
        let payload = web::Payload::from_request(req, payload);
        let req = req.clone();
        Box::pin(async move {
            Ok(Self {
                req,
                payload: payload.await.map_err(ApiError::internal)?,
                input: PhantomData,
            })
        })
    }
}

impl<T: DeserializeOwned> Write<T> {
    /// Reads and parses the body: `415` for another media type, `413` when
    /// too large, `408` when it comes too slowly, `400` for malformed JSON,
    /// `422` naming the field for the wrong shape.
    pub async fn read(self) -> Result<Parsed<T>, ApiError> {
        let state = state(&self.req)?;
        let body = read_json_bytes(&self.req, self.payload, state.http.body_limits()).await?;
        let input = parse_json(&body)?;
        Ok(Parsed {
            input,
            body,
            req: self.req,
            state,
        })
    }

    /// [`Write::read`] for a write whose body may be left out: an empty
    /// (or blank) body is `T::default()`, whatever its media type.
    pub async fn read_or_default(self) -> Result<Parsed<T>, ApiError>
    where
        T: Default,
    {
        let state = state(&self.req)?;
        let limits = state.http.body_limits();
        let body = read_bytes(&self.req, self.payload, limits.max_bytes, limits.pace).await?;
        let input = if body.iter().all(u8::is_ascii_whitespace) {
            T::default()
        } else if !is_json(&media_type(&self.req)) {
            return Err(ApiError::UnsupportedMediaType);
        } else {
            parse_json(&body)?
        };
        Ok(Parsed {
            input,
            body,
            req: self.req,
            state,
        })
    }

    /// Reads the body and runs `work` on it; see [`Parsed::run`].
    pub async fn run<F>(self, caller: &Principal, rule: KeyRule, work: F) -> WriteResult
    where
        F: for<'t> FnOnce(&'t DatabaseTransaction, T, IfMatch) -> Work<'t>,
    {
        self.read().await?.run(caller, rule, work).await
    }
}

pub type Work<'t> = LocalBoxFuture<'t, Result<Reply, ApiError>>;
pub type WriteResult = Result<HttpResponse, ApiError>;

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal("application state missing"))
}

/// A write whose body has been read and parsed.
pub struct Parsed<T> {
    /// What the client sent; a handler may check or complete it before
    /// [`Parsed::run`].
    pub input: T,
    body: web::Bytes,
    req: HttpRequest,
    state: web::Data<AppState>,
}

impl<T> Parsed<T> {
    /// The same write with its input checked or converted first (a `422`
    /// here releases nothing: no key has been claimed yet).
    pub fn try_map<U>(
        self,
        f: impl FnOnce(T) -> Result<U, ApiError>,
    ) -> Result<Parsed<U>, ApiError> {
        Ok(Parsed {
            input: f(self.input)?,
            body: self.body,
            req: self.req,
            state: self.state,
        })
    }

    pub fn request(&self) -> &HttpRequest {
        &self.req
    }

    pub fn state(&self) -> web::Data<AppState> {
        self.state.clone()
    }

    /// Runs `work(txn, input, if_match)` in one write transaction, under the
    /// request's `Idempotency-Key` when it has one (`rule` says whether it
    /// must): the effects and the stored response commit together, and a
    /// repeat gets the stored response.
    pub async fn run<F>(self, caller: &Principal, rule: KeyRule, work: F) -> WriteResult
    where
        F: for<'t> FnOnce(&'t DatabaseTransaction, T, IfMatch) -> Work<'t>,
    {
        let if_match = if_match_version(&self.req);
        let input = self.input;
        idempotency::run(
            &self.state,
            caller,
            &self.req,
            &self.body,
            rule,
            move |txn| work(txn, input, if_match),
        )
        .await
    }
}
