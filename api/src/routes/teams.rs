//! `GET /api/teams`, `PUT /api/teams/{name}` and
//! `GET /api/reports/speed-to-lead`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, put, web};
use domain::lead::speed_to_lead::report::{self, Report, ReportFilter};
use domain::lead::speed_to_lead::team;

use crate::http::auth::{AdminOnly, Caller, SalesUp};
use crate::http::error::ApiError;
use crate::http::idempotency::{KeyRule, Reply};
use crate::http::params::{IdempotencyKey, IfMatch};
use crate::http::state::AppState;
use crate::http::write::{Write, WriteResult};
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::teams::{ReportParams, TeamIn, TeamList, TeamOut};

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list_teams)
        .service(put_team)
        .service(speed_to_lead);
}

/// The teams with working hours and a response target.
///
/// Principals name their team (`PATCH /api/principals/{id}`); a principal
/// without a team, or whose team has no settings here, follows the team
/// named `default`, and without that a 60-minute target around the clock
/// in UTC.
#[utoipa::path(
    operation_id = "list_teams",
    tag = "crm",
    responses((status = 200, description = "The teams", body = TeamList, example = json!(examples::team_list()))),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/teams")]
async fn list_teams(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let data: Vec<TeamOut> = team::list(state.reads.db())
        .await?
        .into_iter()
        .map(TeamOut::from)
        .collect();
    Ok(HttpResponse::Ok().json(TeamList { data }))
}

/// Set a team's working hours, response target and escalation.
///
/// Creates the team's settings (`201`) or replaces them (`200`; `If-Match`
/// honoured). A lead's response is due `response_target_minutes` of working
/// time after it is assigned, counted on `work_days` between `work_start`
/// and `work_end` in `time_zone`; a lead still unanswered then is overdue
/// and goes to whom `escalation` names.
#[utoipa::path(
    operation_id = "put_team",
    tag = "crm",
    params(("name" = String, Path, description = "The team's name (`default` for principals without one)"), IdempotencyKey, IfMatch),
    request_body(content = TeamIn, example = json!({"time_zone": "Europe/Berlin", "work_days": ["mon", "tue", "wed", "thu", "fri"], "work_start": "09:00", "work_end": "17:30", "response_target_minutes": 15, "escalation": {"to": "next_available"}})),
    responses(
        (status = 200, description = "Replaced", body = TeamOut, headers(("ETag" = String)), example = json!(examples::team())),
        (status = 201, description = "Created", body = TeamOut, headers(("ETag" = String)), example = json!(examples::team_created())),
        (status = 412, description = "`/problems/precondition-failed`: `If-Match` names another version"),
        (status = 422, description = "`/problems/validation`: an unknown time zone or day, a malformed or empty working day, a target out of range, an escalation to a principal who is not active sales"),
    ),
    security(("bearer" = ["admin"])),
)]
#[put("/api/teams/{name}")]
async fn put_team(
    caller: Caller<AdminOnly>,
    name: web::Path<String>,
    write: Write<TeamIn>,
) -> WriteResult {
    let name = name.into_inner();
    write
        .run(&caller, KeyRule::Optional, move |txn, input, if_match| {
            Box::pin(async move {
                let (saved, created) = team::put(txn, &name, &input.into(), &if_match).await?;
                let status = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                Reply::tagged(status, &TeamOut::from(saved))
            })
        })
        .await
}

/// Speed to lead: how fast leads get an owner and an answer.
///
/// For the leads received in `window`, per source and per owner: the
/// system's delay (received → assigned) and the rep's (assigned → first
/// response: a note, a call logged, a status move, a task done) as p50/p90
/// in seconds, how many were answered within their target, and the
/// breaches (answered late, or unanswered past due).
#[utoipa::path(
    operation_id = "speed_to_lead_report",
    tag = "crm",
    params(ReportParams),
    responses(
        (status = 200, description = "The report", body = Report, example = json!(examples::speed_to_lead_report())),
        (status = 422, description = "`/problems/validation`: `window` is not 24h, 7d or 30d"),
    ),
    security(("bearer" = ["sales", "ops", "admin"])),
)]
#[get("/api/reports/speed-to-lead")]
async fn speed_to_lead(
    _: Caller<SalesUp>,
    state: web::Data<AppState>,
    params: web::Query<ReportParams>,
) -> Result<HttpResponse, ApiError> {
    let params = params.into_inner();
    let filter = ReportFilter {
        window: params.window.unwrap_or_else(|| "24h".into()),
        source: params.source,
        team: params.team,
    };
    let report = report::report(state.reads.db(), &filter, domain::clock::now()).await?;
    Ok(HttpResponse::Ok().json(report))
}
