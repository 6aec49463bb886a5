"""The app's side of the relay: the one object through which the app uses it.

``link.RelayLink`` owns the running ``RelayService`` and is the only code outside the
``zcoder.relay`` package that reaches the service or the spool. It feeds
``zcoder.relay.inbound.Inbound``, which owns every accepted message (a sans-I/O state
machine), and performs what it decides; ``receipts`` tells our senders what became of
their messages, ``outbox`` keeps what we sent and takes their receivers' receipts;
``labels``, ``send`` and ``sent`` name send targets, serve ``/send`` and ``/agents
sent|cancel`` and say goodbye on the way out.
"""
