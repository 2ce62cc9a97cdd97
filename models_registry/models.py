"""Registry models. The full registry (models, versions, aliases) grows here."""

from django.core.validators import RegexValidator
from django.db import models

team_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
    "Use letters, digits, '_', '.' or '-', starting with a letter or digit.",
)


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[team_name_validator])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
