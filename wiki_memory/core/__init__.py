"""The core: ``Memory`` (the composition root and its operations), the one scope rule,
the single writer, the brief and handoffs. Every face reaches storage through here."""
