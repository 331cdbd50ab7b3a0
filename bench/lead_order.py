"""Per-lead order of outgoing webhooks, as the chaos and scale-out
receivers check it: each lead's events must arrive in order, so the lead's
`version` in an event never goes back for its lead (a redelivery repeats a
version, which is in order). Not thread-safe: callers hold their
receiver's lock."""
import json

# Where each event type names the lead and the lead's version after the
# change: a snapshot's `id`, or `lead_id` beside `version`. A note, an
# erasure and a ping carry no lead version; a deal's `version` is the deal's.
LEAD_FIELD = {"lead.created": "id", "lead.updated": "id", "lead.status_changed": "lead_id",
              "lead.assigned": "lead_id", "lead.converted": "lead_id"}


class LeadOrder:
    def __init__(self):
        self.last_version = {}
        self.out_of_order = []

    def saw(self, body):
        """Records one delivered body; events that carry no lead version say
        nothing of order."""
        try:
            event = json.loads(body)
            field = LEAD_FIELD.get(event.get("type"))
            data = event.get("data") or {}
            lead, version = data.get(field), data.get("version")
        except (ValueError, AttributeError):
            return
        if not (isinstance(lead, int) and isinstance(version, int)):
            return
        last = self.last_version.get(lead, version)
        if version < last:
            self.out_of_order.append((lead, version, last))
        self.last_version[lead] = max(version, last)

    def check(self, report, failures):
        """Adds the figures to `report`, and a failure when an event came
        out of order or no lead's events came at all."""
        report.update(leads_whose_events_arrived=len(self.last_version),
                      events_out_of_order=len(self.out_of_order))
        if not self.last_version or self.out_of_order:
            failures.append(f"per-lead order: {len(self.out_of_order)} events arrived after a later version "
                            f"of their lead (first: {self.out_of_order[:3]}), "
                            f"{len(self.last_version)} leads' events received")
