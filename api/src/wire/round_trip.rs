//! Every answer type reads back what it writes: a client (the tests, a
//! script) can take the server's own types for the bodies it receives. Each
//! type's sample is built from its schema in the committed OpenAPI
//! document, every property present, so a field the type would drop or
//! rename on the way back fails here.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::wire::{
    companies, contacts, convert, crm, deliveries, event_types, imports, inbox, lead_data,
    lead_processing, leads, principals, reconcile, reconcile_rejected, routing_rules, sources,
    subscriptions, tokens, trace, users,
};

const DOCUMENT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json"));

/// A value of `schema` with every property set and no `null`s; a schema
/// that holds itself (a subject export's merged leads) holds an empty list
/// of itself, not an endless one.
fn sample(schemas: &Value, schema: &Value) -> Value {
    sample_within(schemas, schema, &mut Vec::new())
}

fn sample_within(schemas: &Value, schema: &Value, within: &mut Vec<String>) -> Value {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        within.push(name.to_owned());
        let value = sample_within(schemas, &schemas[name], within);
        within.pop();
        return value;
    }
    // The first variant that is not `null` (an `Option`'s schema is one).
    if let Some(variants) = schema["oneOf"].as_array() {
        let first = variants.iter().find(|v| v["type"] != "null");
        return first.map_or(Value::Null, |variant| {
            sample_within(schemas, variant, within)
        });
    }
    if let Some(parts) = schema["allOf"].as_array() {
        let mut merged = Map::new();
        for part in parts {
            if let Value::Object(fields) = sample_within(schemas, part, within) {
                merged.extend(fields);
            }
        }
        return Value::Object(merged);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|all| all.first()) {
        return first.clone();
    }
    let kind = match &schema["type"] {
        Value::Array(kinds) => kinds.iter().find(|k| *k != "null").cloned(),
        other => Some(other.clone()),
    };
    match kind.as_ref().and_then(Value::as_str) {
        Some("string") if schema["format"] == "date-time" => json!("2026-01-02T03:04:05Z"),
        Some("string") => json!("text"),
        Some("integer") => json!(7),
        Some("number") => json!(0.5),
        Some("boolean") => json!(true),
        Some("array") => {
            let itself = schema["items"]["$ref"]
                .as_str()
                .map(|r| r.trim_start_matches("#/components/schemas/"))
                .is_some_and(|name| within.iter().any(|w| w == name));
            if itself {
                json!([])
            } else {
                json!([sample_within(schemas, &schema["items"], within)])
            }
        }
        _ => match schema["properties"].as_object() {
            Some(properties) => Value::Object(
                properties
                    .iter()
                    .map(|(key, property)| (key.clone(), sample_within(schemas, property, within)))
                    .collect(),
            ),
            None if schema["additionalProperties"].is_object() => {
                json!({ "key": sample_within(schemas, &schema["additionalProperties"], within) })
            }
            None => json!({ "key": "value" }),
        },
    }
}

/// Panics unless `T` reads its schema's sample and writes it back unchanged,
/// and writes the same again after reading its own output.
fn round_trips<T: Serialize + DeserializeOwned + ToSchema>() {
    let document: Value = serde_json::from_str(DOCUMENT).expect("api/openapi.json");
    let schemas = &document["components"]["schemas"];
    let name = T::name();
    assert!(schemas[name.as_ref()].is_object(), "no schema {name}");
    let input = sample(schemas, &schemas[name.as_ref()]);
    let read: T = serde_json::from_value(input.clone())
        .unwrap_or_else(|e| panic!("{name} does not read {input}: {e}"));
    let written = serde_json::to_value(&read).expect("serialises");
    assert_eq!(written, input, "{name} changes its sample");
    let again: T = serde_json::from_value(written.clone()).expect("reads its own output");
    assert_eq!(serde_json::to_value(&again).expect("serialises"), written);
}

#[test]
fn every_answer_type_reads_back_what_it_writes() {
    round_trips::<companies::CompanyOut>();
    round_trips::<contacts::ContactOut>();
    round_trips::<convert::ConvertOut>();
    round_trips::<convert::ConvertedOut>();
    round_trips::<convert::Ids>();
    round_trips::<crm::Company>();
    round_trips::<crm::Contact>();
    round_trips::<crm::DealOut>();
    round_trips::<crm::CrmActivity>();
    round_trips::<deliveries::OutboxEventOut>();
    round_trips::<deliveries::OutboxDeliveryOut>();
    round_trips::<domain::outbound::delivery::RetryReport>();
    round_trips::<event_types::EventTypeList>();
    round_trips::<imports::ImportRun>();
    round_trips::<imports::RunOut>();
    round_trips::<inbox::InboxEventOut>();
    round_trips::<inbox::BulkRetryOut>();
    round_trips::<lead_data::ErasureOut>();
    round_trips::<lead_data::SubjectExportOut>();
    round_trips::<lead_processing::FailureOut>();
    round_trips::<lead_processing::RetryOut>();
    round_trips::<leads::LeadOut>();
    round_trips::<leads::ActivityOut>();
    round_trips::<leads::LeadConversionOut>();
    round_trips::<leads::ErasureRecordOut>();
    round_trips::<leads::LeadDetail>();
    round_trips::<principals::PrincipalOut>();
    round_trips::<routing_rules::RoutingRulesOut>();
    round_trips::<routing_rules::PreviewOut>();
    round_trips::<reconcile::ReconcileRunOut>();
    round_trips::<reconcile::ReconcileRejectedOut>();
    round_trips::<reconcile_rejected::RetryOut>();
    round_trips::<sources::SourceOut>();
    round_trips::<sources::SourceList>();
    round_trips::<subscriptions::CreatedOut>();
    round_trips::<subscriptions::SubscriptionList>();
    round_trips::<subscriptions::RotatedOut>();
    round_trips::<subscriptions::TestOut>();
    round_trips::<domain::outbound::subscription::SubscriptionView>();
    round_trips::<trace::TraceOut>();
    round_trips::<domain::ops::series::Series>();
    round_trips::<users::UserOut>();
    round_trips::<users::SessionOut>();
    round_trips::<tokens::TokenOut>();
    round_trips::<tokens::IssuedTokenOut>();
}

/// Request bodies go the other way: what a client writes, the server reads.
#[test]
fn every_request_type_reads_what_it_writes() {
    use crate::wire::deals;
    round_trips::<companies::CompanyIn>();
    round_trips::<contacts::ContactIn>();
    round_trips::<deals::DealIn>();
    round_trips::<deals::TransitionIn>();
    round_trips::<convert::ConvertIn>();
    round_trips::<inbox::BulkRetryIn>();
    round_trips::<lead_processing::RetryIn>();
    round_trips::<leads::TransitionIn>();
    round_trips::<leads::NoteIn>();
    round_trips::<reconcile_rejected::RetryIn>();
    round_trips::<subscriptions::SubscriptionIn>();
    round_trips::<subscriptions::RotateIn>();
    round_trips::<deliveries::RetryManyIn>();
    round_trips::<principals::PrincipalPatch>();
    round_trips::<routing_rules::RoutingRulesIn>();
    round_trips::<routing_rules::PreviewIn>();
}
