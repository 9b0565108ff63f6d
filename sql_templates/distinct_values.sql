SELECT DISTINCT {{ column | ident }} FROM {{ relation }} WHERE {{ column | ident }} IS NOT NULL
