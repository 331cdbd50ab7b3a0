//! The routing rules: which team a lead goes to, by its source and by
//! values in its payload (JSON pointers: a country, a company size). The
//! first rule that matches decides; a lead no rule matches goes to every
//! active sales principal, as without rules. The list is replaced whole,
//! under `If-Match` on its `version`.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::entities::routing_rules::{self, Column};
use crate::error::{Error, FieldError};
use crate::precondition::IfMatch;
use crate::routing::waiting;
use crate::source_name::is_valid_source_name;

/// The one row that holds the list.
const ROW: i32 = 1;
pub const MAX_RULES: usize = 100;
pub const MAX_CONDITIONS: usize = 20;
pub const MAX_VALUES: usize = 100;
pub const MAX_WEIGHT: u32 = 100;

/// How a rule shares its team's leads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// One lead each, in principal id order.
    #[default]
    RoundRobin,
    /// In proportion to `weights` (a principal not listed weighs 1).
    Weighted,
}

/// A test on one value of the lead's payload. Every operator given must
/// hold; a value that is not there fails every test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleCondition {
    /// A JSON pointer into the lead's payload, e.g. `/country` or
    /// `/company/size`.
    pub pointer: String,
    /// The value, as sent (text compared ignoring ASCII case, numbers by
    /// value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub equals: Option<Value>,
    /// One of these values (compared as `equals` does).
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub one_of: Option<Vec<Value>>,
    /// At least this number (the value a number, or text that reads as one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gte: Option<f64>,
    /// At most this number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lte: Option<f64>,
}

/// A weight of one principal of the team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Weight {
    pub principal_id: i64,
    /// 0 (never) to 100.
    pub weight: u32,
}

/// One rule: the leads it takes (`source`, `conditions`) and who gets them
/// (`team`, `strategy`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutingRule {
    /// Only leads from this source; absent: from any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// All must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<RuleCondition>,
    /// The team whose active sales principals share these leads.
    pub team: String,
    #[serde(default)]
    pub strategy: Strategy,
    /// With `weighted`: each principal's share.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<Weight>,
}

impl RoutingRule {
    /// Whether a lead from `source` with `payload` is this rule's.
    pub fn matches(&self, source: &str, payload: &Value) -> bool {
        self.source.as_deref().is_none_or(|s| s == source)
            && self.conditions.iter().all(|c| c.holds(payload))
    }

    /// A principal's weight (1 when not listed).
    pub fn weight_of(&self, principal_id: i64) -> u32 {
        self.weights
            .iter()
            .find(|w| w.principal_id == principal_id)
            .map_or(1, |w| w.weight)
    }
}

impl RuleCondition {
    pub fn holds(&self, payload: &Value) -> bool {
        let Some(value) = payload.pointer(&self.pointer) else {
            return false;
        };
        self.equals.as_ref().is_none_or(|e| same(value, e))
            && self
                .one_of
                .as_ref()
                .is_none_or(|list| list.iter().any(|e| same(value, e)))
            && self
                .gte
                .is_none_or(|min| number(value).is_some_and(|n| n >= min))
            && self
                .lte
                .is_none_or(|max| number(value).is_some_and(|n| n <= max))
    }
}

/// Text ignoring ASCII case (`"DE"` is `"de"`), numbers by value (`50` is
/// `50.0`), anything else as JSON.
fn same(value: &Value, expected: &Value) -> bool {
    match (value, expected) {
        (Value::String(a), Value::String(b)) => a.eq_ignore_ascii_case(b),
        (Value::Number(_), Value::Number(_)) => number(value) == number(expected),
        _ => value == expected,
    }
}

/// A number, or text that reads as one (`"250"`: senders often quote them).
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The list and its version.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    pub rules: Vec<RoutingRule>,
    pub version: i64,
    pub updated_at: Option<DateTime<Utc>>,
    pub updated_by: Option<i64>,
}

impl TryFrom<routing_rules::Model> for RuleSet {
    type Error = Error;

    fn try_from(row: routing_rules::Model) -> Result<Self, Error> {
        // Written only through `replace`; a list it cannot read is not ours.
        let rules = serde_json::from_value(row.rules)
            .map_err(|e| Error::Db(sea_orm::DbErr::Custom(format!("routing rules: {e}"))))?;
        Ok(Self {
            rules,
            version: row.version,
            updated_at: row.updated_at,
            updated_by: row.updated_by,
        })
    }
}

pub async fn load<C: ConnectionTrait>(conn: &C) -> Result<RuleSet, Error> {
    routing_rules::Entity::find_by_id(ROW)
        .one(conn)
        .await?
        .ok_or_else(|| {
            Error::Db(sea_orm::DbErr::Custom(
                "the routing rules row is missing".into(),
            ))
        })?
        .try_into()
}

/// Replaces the list under `If-Match`, after checking every rule (a `422`
/// names each bad field, as `rules[2].team`). The leads waiting for an
/// owner are routed again under the new rules.
pub async fn replace<C: ConnectionTrait>(
    conn: &C,
    rules: Vec<RoutingRule>,
    if_match: &IfMatch,
    by: Option<i64>,
) -> Result<RuleSet, Error> {
    check(&rules)?;
    let current = load(conn).await?;
    if_match.check(current.version)?;
    let json = serde_json::to_value(&rules)
        .map_err(|e| Error::Db(sea_orm::DbErr::Custom(e.to_string())))?;
    let updated = routing_rules::Entity::update_many()
        .col_expr(Column::Rules, Expr::val(json))
        .col_expr(Column::Version, Expr::col(Column::Version).add(1))
        .col_expr(Column::UpdatedAt, Expr::val(crate::clock::now()))
        .col_expr(Column::UpdatedBy, Expr::val(by))
        .filter(Column::Id.eq(ROW))
        .filter(Column::Version.eq(current.version))
        .exec_with_returning(conn)
        .await?;
    let Some(row) = updated.into_iter().next() else {
        let now = load(conn).await?;
        return Err(Error::PreconditionFailed {
            current: now.version,
        });
    };
    waiting::requeue(conn).await?;
    row.try_into()
}

/// Every field error of `rules`, or none.
fn check(rules: &[RoutingRule]) -> Result<(), Error> {
    let mut errors = Vec::new();
    if rules.len() > MAX_RULES {
        errors.push(FieldError::new("rules", "at most 100 rules"));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = |field: &str| format!("rules[{i}].{field}");
        if let Some(source) = &rule.source
            && !is_valid_source_name(source)
        {
            errors.push(FieldError::new(at("source"), "is not a valid source name"));
        }
        let team = rule.team.trim();
        if team != rule.team
            || team.is_empty()
            || team.chars().count() > super::staff::MAX_TEAM_LEN
            || team.chars().any(char::is_control)
        {
            errors.push(FieldError::new(
                at("team"),
                "must be 1 to 64 characters, without control characters or outer spaces",
            ));
        }
        if rule.conditions.len() > MAX_CONDITIONS {
            errors.push(FieldError::new(at("conditions"), "at most 20 conditions"));
        }
        for (j, c) in rule.conditions.iter().enumerate() {
            let at = |field: &str| format!("rules[{i}].conditions[{j}].{field}");
            if !c.pointer.starts_with('/') || c.pointer.len() > 256 {
                errors.push(FieldError::new(
                    at("pointer"),
                    "must be a JSON pointer such as /country (at most 256 characters)",
                ));
            }
            if c.equals.is_none() && c.one_of.is_none() && c.gte.is_none() && c.lte.is_none() {
                errors.push(FieldError::new(
                    at("pointer"),
                    "give at least one of equals, in, gte and lte",
                ));
            }
            if c.one_of
                .as_ref()
                .is_some_and(|l| l.is_empty() || l.len() > MAX_VALUES)
            {
                errors.push(FieldError::new(at("in"), "must hold 1 to 100 values"));
            }
        }
        if rule.strategy == Strategy::RoundRobin && !rule.weights.is_empty() {
            errors.push(FieldError::new(
                at("weights"),
                "are for the weighted strategy",
            ));
        }
        for (j, w) in rule.weights.iter().enumerate() {
            if w.weight > MAX_WEIGHT {
                errors.push(FieldError::new(
                    format!("rules[{i}].weights[{j}].weight"),
                    "must be 0 to 100",
                ));
            }
            if rule.weights[..j]
                .iter()
                .any(|o| o.principal_id == w.principal_id)
            {
                errors.push(FieldError::new(
                    format!("rules[{i}].weights[{j}].principal_id"),
                    "is listed twice",
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(errors))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(value: Value) -> RoutingRule {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_rule_matches_by_source_and_payload_values() {
        let dach = rule(json!({"source": "webform", "team": "dach",
            "conditions": [{"pointer": "/country", "in": ["DE", "AT", "CH"]},
                           {"pointer": "/company/size", "gte": 50, "lte": 500}]}));
        let payload = json!({"country": "de", "company": {"size": "120"}});
        assert!(dach.matches("webform", &payload));
        assert!(!dach.matches("ads", &payload));
        assert!(!dach.matches(
            "webform",
            &json!({"country": "FR", "company": {"size": 120}})
        ));
        assert!(!dach.matches(
            "webform",
            &json!({"country": "DE", "company": {"size": 20}})
        ));
        assert!(!dach.matches("webform", &json!({"country": "DE"})));
        let any = rule(json!({"team": "all", "conditions": [{"pointer": "/size", "equals": 50}]}));
        assert!(any.matches("ads", &json!({"size": 50.0})));
    }

    #[test]
    fn bad_rules_name_every_bad_field() {
        let rules = vec![
            rule(json!({"team": " x", "source": "Not A Source"})),
            rule(json!({"team": "y", "conditions": [{"pointer": "country"}],
                "weights": [{"principal_id": 1, "weight": 101}]})),
        ];
        let Err(Error::Invalid(errors)) = check(&rules) else {
            panic!("accepted");
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "rules[0].source",
                "rules[0].team",
                "rules[1].conditions[0].pointer",
                "rules[1].conditions[0].pointer",
                "rules[1].weights",
                "rules[1].weights[0].weight",
            ]
        );
    }
}
