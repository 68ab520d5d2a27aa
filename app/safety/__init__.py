"""What keeps questions, passages and answers safe: the question and answer screens
(``moderation``, ``profanity_scorer``), the passage screen against injected instructions
(``injection``) and personal data redaction (``redaction``)."""
