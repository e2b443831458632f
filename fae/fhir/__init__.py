"""fae.fhir"""
