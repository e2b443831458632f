"""The booking plan the LLM server tests drive: create a patient, then an appointment for it."""

CREATED = 1_700_000_000

BOOKING_PROMPT = "Register the patient Ada Lovelace and book her first appointment."

BOOKING_PLAN = {
    "name": "booking",
    "steps": [
        {
            "call": "createResource",
            "args": {
                "resourceType": "Patient",
                "resource": {"resourceType": "Patient", "name": [{"family": "Lovelace"}]},
            },
            "save": "patient",
        },
        {
            "call": "createResource",
            "args": {
                "resourceType": "Appointment",
                "resource": {
                    "resourceType": "Appointment",
                    "status": "booked",
                    "participant": [{"actor": {"reference": "Patient/${patient.id}"}}],
                },
            },
            "save": "appointment",
        },
        {"answer": "Booked appointment ${appointment.id} for patient ${patient.id}."},
    ],
}


# What a client offers so the scripted models may call the booking plan's tool (no tools: text only).
OFFERED_TOOLS = [{"type": "function", "function": {"name": "createResource", "parameters": {"type": "object"}}}]
