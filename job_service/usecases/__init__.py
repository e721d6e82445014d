"""The use cases of the job service, one module per concern, written against the ports.

Servicers translate protobuf to these calls and back; everything a request must satisfy is
checked here, before anything is read or written.
"""
