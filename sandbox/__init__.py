"""The local sandbox: moto's server on localhost, with the platform deployed into it."""
