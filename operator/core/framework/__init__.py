"""The Scheduling Framework: plugin interfaces, cycle state, the runtime that runs a profile's
plugins, Permit gates, the what-if Filter passes. Imports only shoal.core.state."""
