"""The constraints check (issue 26): every request the platform sends, against botocore's full
service models (:mod:`.model`) and the services' documented cross-field rules (:mod:`.rules`)."""
