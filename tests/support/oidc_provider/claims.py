"""The test provider's claims and checks, as Keycloak or Authentik have them: name, e-mail and a
``groups`` claim (the user's Django groups, with the ``profile`` scope); a disabled user's refresh
tokens and access tokens are refused (``invalid_grant``, 401) until they are enabled again."""

from oauth2_provider.oauth2_validators import OAuth2Validator


class ProviderValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "profile"}

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.username,
            "given_name": user.first_name,
            "family_name": user.last_name,
            "email": user.email,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs):
        return (
            super().validate_refresh_token(refresh_token, client, request, *args, **kwargs) and request.user.is_active
        )

    def validate_bearer_token(self, token, scopes, request):
        valid = super().validate_bearer_token(token, scopes, request)
        return valid and request.user is not None and request.user.is_active
