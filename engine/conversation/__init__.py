"""The conversation layer every engine shares: listening and turn-taking
(:mod:`~omnicall.engine.conversation.listener`, on the turn detector and the end-of-turn model), a
reply's way out (:mod:`~omnicall.engine.conversation.reply_gate`: held while speculative, the first
sound stamped once, what the caller heard), and the echo checks."""
